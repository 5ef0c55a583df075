(function_declaration) @scope
(method_declaration) @scope
(func_literal) @scope
