(function_declaration) @scope
(generator_function_declaration) @scope
(method_definition) @scope
(arrow_function) @scope
(function_expression) @scope
(class_declaration) @scope.class
