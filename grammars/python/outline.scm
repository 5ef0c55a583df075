(module (import_statement) @item)
(module (import_from_statement) @item)
(module (future_import_statement) @item)
(module (expression_statement (assignment)) @item)
(function_definition body: (block) @body) @def
(class_definition body: (block) @body) @container
(class_definition body: (block (expression_statement (assignment)) @item))
