//! Rego the bytecode VM compiles but evaluates wrongly: a set that uses it runs on the
//! interpreter instead, and says why.
//!
//! Entry point: [`vm_hazard`]. regorus 0.14.1's VM gets `every` wrong when the body indexes
//! something by the loop's value variable: `every i in members { groups[i].demand == d }`
//! compiles the index as a loop of its own with `i` free, so the body holds when *some*
//! element satisfies it, and the `every` answers true where the interpreter (and OPA) answer
//! false. The capacity policy refused correct gangs because of it ("together they need room
//! for 5 pods of that size" for a GPU-less Master beside 1-GPU Workers). The shipped policies
//! write such conditions as `count([x | some x in xs; not cond(x)]) == 0`; a set with `every`
//! anywhere runs on the interpreter, a few times slower but right (which shapes of body are
//! safe is not something to bet a verdict on).

use regorus::unstable::{Lexer, Source, TokenKind};

use super::load::RegoFile;

/// The first `every` statement among `files`, as "file:line", with why the set then runs on
/// the interpreter; None when the VM may run them.
pub fn vm_hazard<'a>(files: impl IntoIterator<Item = &'a RegoFile>) -> Option<String> {
    files.into_iter().find_map(|file| {
        let line = every_line(file)?;
        Some(format!(
            "{}:{line} uses `every`, which regorus 0.14.1's bytecode VM can evaluate as \
             `some` (a body indexing by the loop variable holds if one element satisfies it); \
             write it as count([x | some x in xs; not cond(x)]) == 0 to run on the VM",
            file.path.display()
        ))
    })
}

/// The line of the first `every` keyword of `file` (comments and strings are not tokens).
/// A file the lexer cannot read is left to the compiler, which reports it properly.
fn every_line(file: &RegoFile) -> Option<u32> {
    let name = file.path.display().to_string();
    let source = Source::from_contents(name, file.text.clone()).ok()?;
    let mut lexer = Lexer::new(&source);
    loop {
        let token = lexer.next_token().ok()?;
        match token.0 {
            TokenKind::Eof => return None,
            TokenKind::Ident if token.1.text() == "every" => return Some(token.1.line),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn file(text: &str) -> RegoFile {
        RegoFile {
            path: PathBuf::from("p.rego"),
            text: text.to_string(),
        }
    }

    #[test]
    fn an_every_statement_is_found_by_its_line() {
        let f = file("package p\nimport rego.v1\n\nok if {\n\tevery x in [1] { x > 0 }\n}\n");
        let why = vm_hazard([&f]).unwrap_or_default();
        assert!(why.starts_with("p.rego:5 uses `every`"), "{why}");
    }

    #[test]
    fn every_in_comments_strings_and_names_is_not_a_hazard() {
        let f = file(
            "package p\nimport rego.v1\n# every pod\nmsg := \"every replica\"\neverything := 1\n",
        );
        assert_eq!(vm_hazard([&f]), None);
    }
}
