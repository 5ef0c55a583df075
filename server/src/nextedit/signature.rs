//! The signature rule: the user's edit changed a function's parameter list, so its calls in
//! the file follow. A removed parameter takes its argument out of each call (the keyword one,
//! or the positional one at its place) — deterministic; a parameter added without a default
//! is passed by name where the call has a variable of that name, else its place in each
//! one-line call is a hole for the FIM model, with the new definition shown; a list changed
//! otherwise leaves the arguments of each one-line call as a hole (between its parentheses). A
//! parameter added with a default asks nothing of the calls.

use tree_sitter::Node;

use super::rename::{calls, named_children};
use crate::postprocess::Arguments;
use super::{Doc, Edited, Hole, Kind, Plan, Proposal};

/// One parameter as the calls see it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Param {
    name: String,
    default: bool,
    /// `*args`, `**kwargs`, a bare `*` or `/`.
    special: bool,
}

pub fn plan(edited: &Edited<'_>, doc: Doc<'_>, old: Doc<'_>) -> Option<Plan> {
    let def = function_at(doc, edited.changed.start)?;
    let params = def.child_by_field_name("parameters")?;
    // The user's change is in the parameter list.
    if edited.changed.start < params.start_byte() || edited.changed.end > params.end_byte() {
        return None;
    }
    let name = &doc.text[def.child_by_field_name("name")?.byte_range()];
    let old_def = function_at(old, def.start_byte())?;
    if old_def.start_byte() != def.start_byte() || &old.text[old_def.child_by_field_name("name")?.byte_range()] != name {
        return None;
    }
    let (was, now) = (param_list(old, old_def)?, param_list(doc, def)?);
    if was == now {
        return None;
    }
    // A method called as `x.name(…)`: the calls do not pass `self`.
    let method = def.parent().and_then(|b| b.parent()).is_some_and(|c| c.kind() == "class_definition")
        || def.parent().and_then(|d| d.parent()).and_then(|b| b.parent()).is_some_and(|c| c.kind() == "class_definition");
    let bound = usize::from(method && was.first().is_some_and(|p| p.name == "self" || p.name == "cls"));
    let root = doc.tree.root_node();
    let sites: Vec<Node<'_>> = calls(root, name, doc.text).into_iter().filter(|c| !(def.start_byte() <= c.start_byte() && c.end_byte() <= def.end_byte())).collect();
    let title = format!("update the calls of `{name}`");
    let mut plan = Plan { edits: Vec::new(), holes: Vec::new(), title, exported: None };
    if was.len() == now.len() + 1 {
        let k = (0..was.len()).find(|&i| now.get(i) != Some(&was[i]))?;
        if was[k + 1..] != now[k..] || was[k].special {
            return None;
        }
        for call in sites {
            if let Some(range) = argument_to_remove(call, &was[k].name, k.checked_sub(bound)?, doc.text) {
                plan.edits.push(Proposal { range, new_text: String::new(), kind: Kind::Signature });
            }
        }
        return Some(plan);
    }
    let header = doc.text[def.start_byte()..def.child_by_field_name("body").map_or(def.end_byte(), |b| b.start_byte())].trim_end().to_owned();
    let def_line = def.start_position().row as u32;
    let hole = |range: std::ops::Range<usize>, lead: &str, trail: &str, takes| Hole { range, lead: lead.to_owned(), trail: trail.to_owned(), definition: header.clone(), def_line, takes };
    if now.len() == was.len() + 1 {
        let k = (0..now.len()).find(|&i| was.get(i) != Some(&now[i]))?;
        if now[k + 1..] == was[k..] {
            if now[k].default || now[k].special {
                // Nothing for the calls to do: the edit is complete as it is.
                return Some(plan);
            }
            // One argument more, at its place: a variable of that name where the call is,
            // else the model's.
            let Some(k) = k.checked_sub(bound) else { return Some(plan) };
            for call in sites {
                let Some(args) = call.child_by_field_name("arguments").filter(|a| a.kind() == "argument_list") else { continue };
                let list: Vec<Node<'_>> = named_children(args).collect();
                if list.len() != was.len() - bound || list.iter().any(|a| matches!(a.kind(), "keyword_argument" | "list_splat" | "dictionary_splat")) {
                    continue;
                }
                let (at, lead, trail) = match list.get(k) {
                    Some(next) => (next.start_byte(), "", ", "),
                    None if list.is_empty() => (args.end_byte() - 1, "", ""),
                    None => (list[list.len() - 1].end_byte(), ", ", ""),
                };
                if visible(doc, call, &now[k].name) {
                    plan.edits.push(Proposal { range: at..at, new_text: format!("{lead}{}{trail}", now[k].name), kind: Kind::Signature });
                } else if call.start_position().row == call.end_position().row {
                    plan.holes.push(hole(at..at, lead, trail, Arguments::One));
                }
            }
            return Some(plan);
        }
    }
    if was.len() == now.len() && was.iter().zip(&now).filter(|(a, b)| a != b).count() == 1 {
        // One parameter renamed (the rename rule's), or its default changed: calls stay.
        return Some(plan);
    }
    for call in sites {
        let Some(args) = call.child_by_field_name("arguments") else { continue };
        if call.start_position().row != call.end_position().row {
            continue;
        }
        if !doc.text[..args.end_byte()].ends_with(')') {
            continue;
        }
        plan.holes.push(hole(args.start_byte() + 1..args.end_byte() - 1, "", "", Arguments::List));
    }
    Some(plan)
}

/// Whether a variable `name` is there for `call` to pass: a parameter of the function around
/// it, or a name assigned in that function (or at module level) before the call.
fn visible(doc: Doc<'_>, call: Node<'_>, name: &str) -> bool {
    let mut scope = call.parent();
    while let Some(n) = scope {
        if n.kind() == "function_definition" {
            break;
        }
        scope = n.parent();
    }
    let scope = scope.unwrap_or_else(|| doc.tree.root_node());
    let mut found = false;
    let mut stack = vec![scope];
    while let Some(n) = stack.pop() {
        if found || n.start_byte() >= call.start_byte() {
            continue;
        }
        if n.kind() == "identifier" && &doc.text[n.byte_range()] == name {
            let p = n.parent();
            let attribute = p.is_some_and(|p| p.kind() == "attribute" && p.child_by_field_name("attribute") == Some(n));
            let keyword = p.is_some_and(|p| p.kind() == "keyword_argument" && p.child_by_field_name("name") == Some(n));
            found = !attribute && !keyword;
        }
        let mut c = n.walk();
        // Names inside other functions and classes are theirs.
        stack.extend(n.children(&mut c).filter(|c| !matches!(c.kind(), "function_definition" | "class_definition")));
    }
    found
}

/// The function definition whose header holds byte `at`.
fn function_at(doc: Doc<'_>, at: usize) -> Option<Node<'_>> {
    let mut n = doc.tree.root_node().descendant_for_byte_range(at, at)?;
    loop {
        if n.kind() == "function_definition" {
            return Some(n);
        }
        n = n.parent()?;
    }
}

fn param_list(doc: Doc<'_>, def: Node<'_>) -> Option<Vec<Param>> {
    let params = def.child_by_field_name("parameters")?;
    let text = |n: Node<'_>| doc.text[n.byte_range()].to_owned();
    let mut out = Vec::new();
    for p in named_children(params) {
        let param = match p.kind() {
            "identifier" => Param { name: text(p), default: false, special: false },
            "default_parameter" | "typed_default_parameter" => Param { name: text(p.child_by_field_name("name")?), default: true, special: false },
            "typed_parameter" => Param { name: text(named_children(p).next()?), default: false, special: named_children(p).next()?.kind() != "identifier" },
            _ => Param { name: text(p), default: false, special: true },
        };
        out.push(param);
    }
    if params.has_error() {
        return None;
    }
    Some(out)
}

/// The bytes to delete from `call` for the removed parameter `name`, the `index`-th passed
/// positionally: its keyword argument, else its positional one; `None` when the call passes
/// neither (or unpacks a list before it).
fn argument_to_remove(call: Node<'_>, name: &str, index: usize, text: &str) -> Option<std::ops::Range<usize>> {
    let args: Vec<Node<'_>> = named_children(call.child_by_field_name("arguments")?).collect();
    let keyword = args.iter().position(|a| a.kind() == "keyword_argument" && a.child_by_field_name("name").is_some_and(|k| &text[k.byte_range()] == name));
    let at = match keyword {
        Some(i) => i,
        None => {
            let positional: Vec<usize> = (0..args.len()).take_while(|&i| !matches!(args[i].kind(), "keyword_argument" | "dictionary_splat")).collect();
            if positional.iter().any(|&i| args[i].kind() == "list_splat") {
                return None;
            }
            *positional.get(index)?
        }
    };
    Some(match (at.checked_sub(1), args.get(at + 1)) {
        (_, Some(next)) => args[at].start_byte()..next.start_byte(),
        (Some(prev), None) => args[prev].end_byte()..args[at].end_byte(),
        (None, None) => args[at].byte_range(),
    })
}

#[cfg(test)]
mod tests {
    use crate::nextedit::fixture::edit;

    const SRC: &str = "def load(path, mode, retries):\n    pass\n\nload(p, 'r', 3)\nx = load(q, mode='w', retries=2)\nload(*a)\n";

    #[test]
    fn a_removed_parameter_leaves_the_calls() {
        let (plan, text) = edit(SRC, &SRC.replacen("path, mode, retries", "path, retries", 1));
        assert_eq!(text, "def load(path, retries):\n    pass\n\nload(p, 3)\nx = load(q, retries=2)\nload(*a)\n", "{plan:?}");
        let (_, text) = edit(SRC, &SRC.replacen("path, mode, retries", "path, mode", 1));
        assert_eq!(text, "def load(path, mode):\n    pass\n\nload(p, 'r')\nx = load(q, mode='w')\nload(*a)\n");
    }

    #[test]
    fn an_added_parameter_makes_holes_unless_it_has_a_default() {
        let (plan, _) = edit(SRC, &SRC.replacen("mode, retries)", "mode, retries, timeout)", 1));
        assert!(plan.edits.is_empty());
        // Calls passing keywords or unpacking a list are left alone.
        assert_eq!(plan.holes.len(), 1, "{plan:?}");
        let hole = &plan.holes[0];
        let after = SRC.replacen("mode, retries)", "mode, retries, timeout)", 1);
        assert_eq!((hole.range.len(), hole.lead.as_str(), &after[hole.range.start - 1..hole.range.start]), (0, ", ", "3"));
        assert_eq!(hole.definition, "def load(path, mode, retries, timeout):");
        let (plan, _) = edit(SRC, &SRC.replacen("mode, retries)", "mode, retries, timeout=5)", 1));
        assert_eq!((plan.edits.len(), plan.holes.len()), (0, 0));
    }

    #[test]
    fn an_added_parameter_named_like_a_variable_at_the_call_is_passed() {
        let src = "def send(data):\n    pass\n\ndef go(data, retries):\n    send(data)\n\nsend(x)\n";
        let (plan, text) = edit(src, &src.replacen("send(data):", "send(data, retries):", 1));
        assert_eq!(text, "def send(data, retries):\n    pass\n\ndef go(data, retries):\n    send(data, retries)\n\nsend(x)\n");
        assert_eq!(plan.holes.len(), 1, "`retries` is not there at the module's call: the model's");
    }

    #[test]
    fn a_method_s_calls_skip_self() {
        let src = "class A:\n    def put(self, k, v):\n        pass\n\n    def g(self):\n        self.put(1, 2)\n";
        let (_, text) = edit(src, &src.replacen("self, k, v", "self, v", 1));
        assert_eq!(text, "class A:\n    def put(self, v):\n        pass\n\n    def g(self):\n        self.put(2)\n");
    }
}
