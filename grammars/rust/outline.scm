(use_declaration) @item
(const_item) @item
(static_item) @item
(type_item) @item
(function_signature_item) @item
(struct_item) @item
(enum_item) @item
(function_item body: (block) @body) @def
(impl_item body: (declaration_list) @body) @container
(trait_item body: (declaration_list) @body) @container
(mod_item body: (declaration_list) @body) @container
