(function_definition) @scope
(class_definition) @scope.class
