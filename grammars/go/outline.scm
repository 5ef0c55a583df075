(package_clause) @item
(import_declaration) @item
(const_declaration) @item
(var_declaration) @item
(type_declaration) @item
(function_declaration body: (block) @body) @def
(method_declaration body: (block) @body) @def
