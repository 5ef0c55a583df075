(function_item) @scope
(closure_expression) @scope
(impl_item) @scope.class
(trait_item) @scope.class
(mod_item) @scope.class
