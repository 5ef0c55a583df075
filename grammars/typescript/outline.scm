(program (import_statement) @item)
(program (lexical_declaration (variable_declarator value: [(number) (string) (template_string) (identifier) (member_expression) (call_expression)])) @item)
(program (lexical_declaration (variable_declarator value: [(arrow_function body: (statement_block) @body) (function_expression body: (statement_block) @body)])) @def)
(interface_declaration) @item
(type_alias_declaration) @item
(enum_declaration) @item
(function_declaration body: (statement_block) @body) @def
(generator_function_declaration body: (statement_block) @body) @def
(method_definition body: (statement_block) @body) @def
(class_declaration body: (class_body) @body) @container
(abstract_class_declaration body: (class_body) @body) @container
