# Builds llama.cpp's CUDA backend from a copy of its sources patched with batch-invariant.patch
# (beside this file), so that ghostline's CUDA build has batch-invariant kernels: the patch changes
# nothing unless GGML_CUDA_BATCH_INVARIANT=1, which ghostline sets for itself.
#
# CMake includes this file at llama.cpp's project() calls (CMAKE_PROJECT_INCLUDE): set in
# .cargo/config.toml for llama-cpp-sys-2's build (which passes CMAKE_* variables to CMake), and by
# scripts/device/build.sh. The crate's own llama.cpp is left untouched. Where there is no CUDA
# backend (no `ggml-cuda` target) it does nothing. Where the patch does not apply (another
# llama.cpp), it warns and builds the stock kernels: ghostline then finds no BATCH_INVARIANT
# feature and keeps the aligned prefill, deterministic and slower.
include_guard(GLOBAL)
if(CMAKE_VERSION VERSION_LESS 3.19)  # cmake_language(DEFER)
  message(WARNING "ghostline: CMake ${CMAKE_VERSION} is older than 3.19: llama.cpp's stock CUDA kernels are built")
  return()
endif()
set(GHOSTLINE_CUDA_PATCH "${CMAKE_CURRENT_LIST_DIR}/batch-invariant.patch")

function(ghostline_batch_invariant_cuda)
  if(NOT TARGET ggml-cuda)
    return()
  endif()
  get_target_property(dir ggml-cuda SOURCE_DIR)
  # The copy keeps the folder's name: the sources include their headers both as "x.cuh" and as
  # "ggml-cuda/x.cuh", and the second must find the copy too (its root goes first on the path).
  set(root "${CMAKE_BINARY_DIR}/ghostline-batch-invariant")
  set(copy "${root}/ggml-cuda")
  file(SHA256 "${GHOSTLINE_CUDA_PATCH}" patch_sum)
  if(NOT EXISTS "${copy}/.patched-${patch_sum}")
    file(REMOVE_RECURSE "${root}")
    file(COPY "${dir}" DESTINATION "${root}")
    find_program(GHOSTLINE_PATCH_TOOL patch)
    if(GHOSTLINE_PATCH_TOOL)
      set(apply "${GHOSTLINE_PATCH_TOOL}" -p3 --forward --batch -i "${GHOSTLINE_CUDA_PATCH}")
    else()
      find_package(Git QUIET)
      set(apply "${GIT_EXECUTABLE}" apply -p3 "${GHOSTLINE_CUDA_PATCH}")
    endif()
    execute_process(COMMAND ${apply} WORKING_DIRECTORY "${root}" RESULT_VARIABLE failed OUTPUT_VARIABLE said ERROR_VARIABLE said)
    if(failed)
      message(WARNING "ghostline: batch-invariant.patch does not apply to this llama.cpp (${said}); "
                      "building its stock CUDA kernels, on which ghostline keeps the aligned prefill")
      file(REMOVE_RECURSE "${root}")
      return()
    endif()
    file(TOUCH "${copy}/.patched-${patch_sum}")
  endif()
  get_target_property(sources ggml-cuda SOURCES)
  set(patched "")
  foreach(source IN LISTS sources)
    if(NOT IS_ABSOLUTE "${source}")
      get_filename_component(source "${dir}/${source}" ABSOLUTE)
    endif()
    file(RELATIVE_PATH rel "${dir}" "${source}")
    if(rel MATCHES "^\\.\\./")
      list(APPEND patched "${source}")
    else()
      list(APPEND patched "${copy}/${rel}")
    endif()
  endforeach()
  set_property(TARGET ggml-cuda PROPERTY SOURCES ${patched})
  target_include_directories(ggml-cuda BEFORE PRIVATE "${root}" "${copy}")
  message(STATUS "ghostline: the CUDA backend builds from ${copy} (batch-invariant.patch)")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL ghostline_batch_invariant_cuda)
