//! The rename rule: the user's edit replaced one identifier by another (every token else the
//! same) at a binding — a function or class name, a parameter, an assigned local, a `self.`
//! attribute — so the other uses of the old name in its scope follow. A parameter's keyword
//! arguments at the function's calls in the file follow too. Deterministic: a rename is a
//! rename.

use tree_sitter::Node;

use super::lex::{lex, TokKind};
use super::{Doc, Edited, Kind, Plan, Proposal, Renamed};

/// Where the renamed name was bound, and so where its uses are.
#[derive(Debug, Clone, Copy)]
enum Binding<'t> {
    /// A name in a scope: uses are identifiers (not `x.name`, not `name=` keywords) in `scope`.
    Name { scope: Node<'t> },
    /// A parameter of `function`: its uses, and `name=` at the function's calls.
    Param { function: Node<'t> },
    /// A method or `self.` attribute of `class`: `self.name` and `cls.name` in the class.
    Attribute { class: Node<'t> },
}

/// The one identifier the edit replaced, and where (byte offsets in the document now).
pub fn renamed(edited: &Edited<'_>, comment: &str) -> Option<(String, String, Vec<usize>)> {
    let (b, a) = (lex(edited.before, comment), lex(edited.after, comment));
    if b.len() != a.len() {
        return None;
    }
    let mut pair: Option<(&str, &str)> = None;
    let mut at = Vec::new();
    for (x, y) in b.iter().zip(&a) {
        if x.text == y.text {
            continue;
        }
        if x.kind != TokKind::Ident || y.kind != TokKind::Ident || pair.is_some_and(|p| p != (x.text, y.text)) {
            return None;
        }
        pair = Some((x.text, y.text));
        at.push(edited.start + y.at);
    }
    let (old, new) = pair?;
    if is_keyword(old) || is_keyword(new) {
        return None;
    }
    Some((old.to_owned(), new.to_owned(), at))
}

fn is_keyword(word: &str) -> bool {
    matches!(
        word,
        "def" | "class" | "return" | "if" | "elif" | "else" | "for" | "while" | "in" | "not" | "and" | "or" | "is" | "None" | "True" | "False"
            | "import" | "from" | "as" | "with" | "try" | "except" | "finally" | "raise" | "lambda" | "yield" | "await" | "async" | "pass"
            | "break" | "continue" | "global" | "nonlocal" | "del" | "assert" | "self" | "cls"
    )
}

pub fn plan(edited: &Edited<'_>, doc: Doc<'_>) -> Option<Plan> {
    let (old, new, at) = renamed(edited, doc.spec.line_comment())?;
    let root = doc.tree.root_node();
    let node = at.iter().find_map(|&p| {
        let n = root.descendant_for_byte_range(p, p + new.len())?;
        (n.kind() == "identifier" && n.byte_range() == (p..p + new.len())).then_some(n)
    })?;
    let binding = binding(node, doc.text)?;
    // The new name taken already there: two variables would become one — not a rename.
    if sites(binding, &new, doc, root).iter().any(|n| !at.contains(&n.start_byte())) {
        return None;
    }
    let edits = sites(binding, &old, doc, root).into_iter().map(|n| Proposal { range: n.byte_range(), new_text: new.clone(), kind: Kind::Rename }).collect();
    let exported = module_level(node).then(|| Renamed { old: old.clone(), new: new.clone() });
    Some(Plan { edits, holes: Vec::new(), title: format!("rename `{old}` to `{new}`"), exported })
}

/// Whether the identifier `node` names a module-level function or class, or is assigned at
/// module level (`NAME = …`): what other files can import.
fn module_level(node: Node<'_>) -> bool {
    let Some(parent) = node.parent() else { return false };
    let at_module = |n: Node<'_>| n.parent().is_some_and(|m| m.kind() == "module");
    match parent.kind() {
        "function_definition" | "class_definition" if parent.child_by_field_name("name") == Some(node) => {
            let def = parent.parent().filter(|p| p.kind() == "decorated_definition").unwrap_or(parent);
            at_module(def)
        }
        "assignment" if parent.child_by_field_name("left") == Some(node) => parent.parent().is_some_and(|s| s.kind() == "expression_statement" && at_module(s)),
        _ => false,
    }
}

/// Where `name` is used under `binding`.
fn sites<'t>(binding: Binding<'t>, name: &str, doc: Doc<'_>, root: Node<'t>) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    let mut push = |n: Node<'t>| out.push(n);
    match binding {
        Binding::Name { scope } => uses(scope, scope, name, doc.text, &mut push),
        Binding::Param { function } => {
            uses(function, function, name, doc.text, &mut push);
            if let Some(f) = function.child_by_field_name("name").map(|n| &doc.text[n.byte_range()]) {
                for call in calls(root, f, doc.text) {
                    let Some(args) = call.child_by_field_name("arguments") else { continue };
                    for arg in named_children(args).filter(|a| a.kind() == "keyword_argument") {
                        if let Some(k) = arg.child_by_field_name("name").filter(|k| &doc.text[k.byte_range()] == name) {
                            push(k);
                        }
                    }
                }
            }
        }
        Binding::Attribute { class } => walk(class, &mut |n| {
            if n.kind() == "attribute" {
                let (Some(object), Some(attr)) = (n.child_by_field_name("object"), n.child_by_field_name("attribute")) else { return true };
                if matches!(&doc.text[object.byte_range()], "self" | "cls") && doc.text[attr.byte_range()] == *name {
                    push(attr);
                }
            }
            true
        }),
    }
    out
}

/// What kind of binding the identifier `node` is, if it is one.
fn binding<'t>(node: Node<'t>, text: &str) -> Option<Binding<'t>> {
    let parent = node.parent()?;
    let is_field = |field: &str| parent.child_by_field_name(field) == Some(node);
    let function_of_params = |params: Node<'t>| params.parent().filter(|f| matches!(f.kind(), "function_definition" | "lambda"));
    match parent.kind() {
        "function_definition" | "class_definition" if is_field("name") => {
            let def = parent.parent().filter(|p| p.kind() == "decorated_definition").unwrap_or(parent);
            let container = def.parent()?;
            // A method: its uses are attributes of the class.
            if container.kind() == "block" && container.parent().is_some_and(|c| c.kind() == "class_definition") {
                return Some(Binding::Attribute { class: container.parent()? });
            }
            Some(Binding::Name { scope: scope_of(def).unwrap_or_else(|| root(node)) })
        }
        "parameters" | "lambda_parameters" => Some(Binding::Param { function: function_of_params(parent)? }),
        "default_parameter" | "typed_default_parameter" if is_field("name") => Some(Binding::Param { function: function_of_params(parent.parent()?)? }),
        "typed_parameter" | "list_splat_pattern" | "dictionary_splat_pattern" => {
            let params = parent.parent().filter(|p| matches!(p.kind(), "parameters" | "lambda_parameters"))?;
            Some(Binding::Param { function: function_of_params(params)? })
        }
        "assignment" | "augmented_assignment" | "for_statement" | "for_in_clause" if is_field("left") => Some(local(node)),
        "pattern_list" | "tuple_pattern" => {
            let holder = parent.parent()?;
            matches!(holder.kind(), "assignment" | "for_statement" | "for_in_clause").then(|| local(node))
        }
        "as_pattern_target" => Some(local(node)),
        "attribute" if is_field("attribute") => {
            let object = parent.child_by_field_name("object")?;
            let assigned = parent.parent().is_some_and(|a| a.kind() == "assignment" && a.child_by_field_name("left") == Some(parent));
            if &text[object.byte_range()] != "self" || !assigned {
                return None;
            }
            let mut up = parent.parent();
            while let Some(n) = up {
                if n.kind() == "class_definition" {
                    return Some(Binding::Attribute { class: n });
                }
                up = n.parent();
            }
            None
        }
        _ => None,
    }
}

fn root(node: Node<'_>) -> Node<'_> {
    let mut n = node;
    while let Some(p) = n.parent() {
        n = p;
    }
    n
}

/// The function (or lambda, or comprehension) a local of `node` lives in, else the module.
fn local(node: Node<'_>) -> Binding<'_> {
    Binding::Name { scope: scope_of(node).unwrap_or_else(|| root(node)) }
}

/// The innermost function-like scope around `node` (not `node` itself).
fn scope_of(node: Node<'_>) -> Option<Node<'_>> {
    let mut up = node.parent();
    while let Some(n) = up {
        if matches!(n.kind(), "function_definition" | "lambda" | "list_comprehension" | "set_comprehension" | "dictionary_comprehension" | "generator_expression") {
            return Some(n);
        }
        up = n.parent();
    }
    None
}

/// Pre-order walk; `visit` returns whether to go into the node's children.
fn walk<'t>(node: Node<'t>, visit: &mut impl FnMut(Node<'t>) -> bool) {
    let mut cursor = node.walk();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if visit(n) {
            let children: Vec<_> = n.children(&mut cursor).collect();
            stack.extend(children.into_iter().rev());
        }
    }
}

pub(super) fn named_children<'t>(node: Node<'t>) -> impl Iterator<Item = Node<'t>> {
    let mut cursor = node.walk();
    let list: Vec<_> = node.named_children(&mut cursor).filter(|n| n.kind() != "comment").collect();
    list.into_iter()
}

/// The identifiers named `name` in `node` that read or write the variable: not `x.name`, not
/// `f(name=…)`, and not inside a nested function that binds `name` itself.
pub(super) fn uses<'t>(node: Node<'t>, scope: Node<'t>, name: &str, text: &str, push: &mut impl FnMut(Node<'t>)) {
    walk(node, &mut |n| {
        if n != scope && matches!(n.kind(), "function_definition" | "lambda" | "class_definition") && binds(n, name, text) {
            // Its name is still ours.
            if let Some(id) = n.child_by_field_name("name").filter(|id| &text[id.byte_range()] == name) {
                push(id);
            }
            return false;
        }
        if n.kind() == "identifier" && &text[n.byte_range()] == name {
            let parent = n.parent();
            let attr = parent.is_some_and(|p| p.kind() == "attribute" && p.child_by_field_name("attribute") == Some(n));
            let keyword = parent.is_some_and(|p| p.kind() == "keyword_argument" && p.child_by_field_name("name") == Some(n));
            if !attr && !keyword {
                push(n);
            }
        }
        true
    });
}

/// Whether the nested function (or class) `def` binds `name` of its own: a parameter, an
/// assignment or an import in its body (not through `global`/`nonlocal`).
fn binds(def: Node<'_>, name: &str, text: &str) -> bool {
    if def.kind() == "class_definition" {
        return false;
    }
    let mut found = false;
    if let Some(params) = def.child_by_field_name("parameters") {
        walk(params, &mut |n| {
            if n.kind() == "identifier" && &text[n.byte_range()] == name {
                let p = n.parent();
                // A default value's names are the outer scope's.
                let value = p.is_some_and(|p| p.child_by_field_name("value") == Some(n));
                found |= !value;
            }
            !found && !matches!(n.kind(), "lambda")
        });
    }
    if found {
        return true;
    }
    let Some(body) = def.child_by_field_name("body") else { return false };
    let mut declared = false;
    walk(body, &mut |n| {
        if n != body && matches!(n.kind(), "function_definition" | "lambda" | "class_definition") {
            return false;
        }
        if matches!(n.kind(), "global_statement" | "nonlocal_statement") && text[n.byte_range()].split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == name) {
            declared = true;
        }
        if matches!(n.kind(), "import_statement" | "import_from_statement") {
            found |= import_binds(n, name, text);
            return false;
        }
        if n.kind() == "identifier" && &text[n.byte_range()] == name {
            if let Some(p) = n.parent() {
                let left = matches!(p.kind(), "assignment" | "augmented_assignment" | "for_statement") && p.child_by_field_name("left") == Some(n);
                found |= left || p.kind() == "as_pattern_target" || (p.kind() == "pattern_list" && p.parent().is_some_and(|g| matches!(g.kind(), "assignment" | "for_statement")));
            }
        }
        true
    });
    found && !declared
}

/// Whether the import statement `stmt` binds the local name `name`: `import name`, `import
/// name.sub` (binds `name`), `from m import name`, `… as name`.
pub(super) fn import_binds(stmt: Node<'_>, name: &str, text: &str) -> bool {
    let mut c = stmt.walk();
    let names: Vec<Node<'_>> = stmt.children_by_field_name("name", &mut c).collect();
    names.into_iter().any(|n| {
        let local = match n.kind() {
            "aliased_import" => n.child_by_field_name("alias").map(|a| &text[a.byte_range()]),
            _ if stmt.kind() == "import_statement" => text[n.byte_range()].split('.').next().map(str::trim),
            _ => Some(&text[n.byte_range()]),
        };
        local == Some(name)
    })
}

/// The calls of `name` in `root`: `name(…)` or `x.name(…)`.
pub(super) fn calls<'t>(root: Node<'t>, name: &str, text: &str) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    walk(root, &mut |n| {
        if n.kind() == "call" {
            let callee = n.child_by_field_name("function");
            let named = match callee {
                Some(f) if f.kind() == "identifier" => &text[f.byte_range()] == name,
                Some(f) if f.kind() == "attribute" => f.child_by_field_name("attribute").is_some_and(|a| &text[a.byte_range()] == name),
                _ => false,
            };
            if named {
                out.push(n);
            }
        }
        true
    });
    out
}

#[cfg(test)]
mod tests {
    use crate::nextedit::fixture::edit;

    #[test]
    fn a_renamed_parameter_takes_its_uses_and_keywords_along() {
        let before = "def area(w, h):\n    s = w * h\n    return s + w\n\nx = w + area(w=1, h=2)\n";
        let after = "def area(width, h):\n    s = w * h\n    return s + w\n\nx = w + area(w=1, h=2)\n";
        let (plan, text) = edit(before, after);
        assert_eq!(text, "def area(width, h):\n    s = width * h\n    return s + width\n\nx = w + area(width=1, h=2)\n");
        assert_eq!(plan.title, "rename `w` to `width`");
    }

    #[test]
    fn a_local_a_function_and_an_attribute() {
        let (_, text) = edit("def f():\n    n = 1\n    return n + g(n)\n", "def f():\n    count = 1\n    return n + g(n)\n");
        assert_eq!(text, "def f():\n    count = 1\n    return count + g(count)\n");
        let (_, text) = edit("def go(a):\n    pass\n\ngo(1)\nx.go\nlambda go: go\n", "def run(a):\n    pass\n\ngo(1)\nx.go\nlambda go: go\n");
        assert_eq!(text, "def run(a):\n    pass\n\nrun(1)\nx.go\nlambda go: go\n");
        let before = "class C:\n    def __init__(self):\n        self.v = 1\n    def g(self):\n        return self.v + v\n";
        let (_, text) = edit(before, &before.replacen("self.v =", "self.value =", 1));
        assert_eq!(text, "class C:\n    def __init__(self):\n        self.value = 1\n    def g(self):\n        return self.value + v\n");
    }

    #[test]
    fn a_function_that_imports_the_name_itself_keeps_its_own() {
        let before = "def go(a):\n    pass\n\ndef f():\n    from other import go\n    return go(1)\n\ndef g():\n    import go.sub\n    return go\n\ndef h():\n    return go(2)\n";
        let (_, text) = edit(before, &before.replacen("def go(", "def run(", 1));
        assert_eq!(text, before.replacen("def go(", "def run(", 1).replace("go(2)", "run(2)"));
    }

    #[test]
    fn a_binding_renamed_to_a_name_in_use_is_no_rename() {
        let before = "def f(key, hooks):\n    hooks = hooks or {}\n    return hooks.get(key)\n";
        let (plan, _) = edit(before, &before.replacen("    hooks =", "    key =", 1));
        assert!(plan.edits.is_empty(), "{plan:?}");
    }

    #[test]
    fn a_use_changed_to_another_name_is_no_rename() {
        let before = "def f(a, b):\n    x = a\n    return a\n";
        let (plan, _) = edit(before, "def f(a, b):\n    x = b\n    return a\n");
        assert!(plan.edits.is_empty(), "{plan:?}");
        let (plan, _) = edit(before, "def f(a, b):\n    x = a + 1\n    return a\n");
        assert!(plan.edits.is_empty(), "{plan:?}");
    }
}
