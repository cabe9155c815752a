//! Reading the docs' shell examples: which fenced blocks are shell, which of
//! them run, the commands in them and the output each shows
//! (CONTRIBUTING.md, "The docs' examples run").
//!
//! A block's info string is its language and then flags: ` ```sh run`
//! runs, ` ```sh norun` is shown only (it needs Docker, a cluster, a
//! second terminal…). A shell block (`sh`, `bash`, `shell`, `console`)
//! with neither flag is an error, and so is an unmarked block holding a
//! `$ ` prompt: nothing shell-like goes unchecked by accident.
//!
//! In an `sh` block, the whole-line comments after a command are the output
//! it shows (`# {"id":"hello-1",…}`); in a `console` block, the lines after a
//! `$ ` command are. `...` in shown output stands for any text.
//!
//! Hand-written: the markdown parsers on crates.io would give the blocks,
//! but the command boundaries (quotes over several lines, `\`) and the
//! shown-output convention are ours either way.

/// A fenced block of a markdown file.
pub struct Block {
    /// Where its opening fence is, 1-based.
    pub line: usize,
    pub lang: String,
    pub flags: Vec<String>,
    /// Its lines, each at its line number.
    pub body: Vec<(usize, String)>,
}

const SHELL: [&str; 4] = ["sh", "bash", "shell", "console"];

/// Every fenced block of `markdown`, in order (indented fences too, as in
/// a list item).
pub fn blocks(markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<(Block, String)> = None;
    for (i, raw) in markdown.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim_start();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let indent = raw.len() - trimmed.len();
                    let mut words = info.split_whitespace().map(str::to_string);
                    let lang = words.next().unwrap_or_default();
                    let block = Block {
                        line,
                        lang,
                        flags: words.collect(),
                        body: Vec::new(),
                    };
                    open = Some((block, " ".repeat(indent)));
                }
            }
            Some((mut block, indent)) => {
                if trimmed.starts_with("```") {
                    found.push(block);
                } else {
                    let text = raw.strip_prefix(indent.as_str()).unwrap_or(trimmed);
                    block.body.push((line, text.to_string()));
                    open = Some((block, indent));
                }
            }
        }
    }
    found
}

/// What to do with a block: run it, show it only, or not a shell block.
#[derive(Debug, PartialEq)]
pub enum Kind {
    Run,
    Shown,
    NotShell,
}

/// A block's kind, or why its marking is wrong.
pub fn kind(block: &Block) -> Result<Kind, String> {
    let run = block.flags.iter().any(|f| f == "run");
    let norun = block.flags.iter().any(|f| f == "norun");
    let shell = SHELL.contains(&block.lang.as_str());
    let prompt = block.body.iter().any(|(_, l)| l.starts_with("$ "));
    match (shell, run, norun) {
        (true, true, false) => Ok(Kind::Run),
        (true, false, true) => Ok(Kind::Shown),
        (true, true, true) => Err("marked both `run` and `norun`".into()),
        (true, false, false) => Err(format!(
            "a `{}` block must be marked `run` or `norun` (```{} run)",
            block.lang, block.lang
        )),
        (false, true, _) | (false, _, true) => Err(format!(
            "`run`/`norun` on a `{}` block: only sh, bash, shell and console blocks run",
            block.lang
        )),
        (false, false, false) if prompt => {
            Err("a block with `$ ` prompts must be ```console run or ```console norun".into())
        }
        (false, false, false) => Ok(Kind::NotShell),
    }
}

/// One command of a runnable block and the output shown after it.
#[derive(Debug, PartialEq)]
pub struct Command {
    pub line: usize,
    pub text: String,
    /// None: the docs show no output, so only its exit status counts.
    pub shown: Option<String>,
}

/// The commands of a runnable block.
pub fn commands(block: &Block) -> Result<Vec<Command>, String> {
    if block.lang == "console" {
        console_commands(block)
    } else {
        script_commands(block)
    }
}

/// `sh`: a command runs to the end of a line outside quotes and without a
/// trailing `\`; whole-line comments after it are its output.
fn script_commands(block: &Block) -> Result<Vec<Command>, String> {
    let mut out: Vec<Command> = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut shown: Vec<String> = Vec::new();
    for (line, text) in &block.body {
        if current.is_none() {
            if let Some(comment) = text.trim_start().strip_prefix('#') {
                let Some(last) = out.last_mut() else {
                    return Err(format!("line {line}: output shown before any command"));
                };
                if last.shown.is_none() {
                    shown.clear();
                }
                shown.push(comment.strip_prefix(' ').unwrap_or(comment).to_string());
                last.shown = Some(shown.join("\n"));
                continue;
            }
            if text.trim().is_empty() {
                continue;
            }
            current = Some((*line, String::new()));
        }
        if let Some((start, mut acc)) = current.take() {
            if !acc.is_empty() {
                acc.push('\n');
            }
            acc.push_str(text);
            if complete(&acc) {
                shown.clear();
                out.push(Command {
                    line: start,
                    text: acc,
                    shown: None,
                });
            } else {
                current = Some((start, acc));
            }
        }
    }
    match current {
        Some((line, _)) => Err(format!(
            "line {line}: the command never ends (an open quote or a trailing \\)"
        )),
        None => Ok(out),
    }
}

/// `console`: `$ ` starts a command (continued by a trailing `\`), and
/// the lines up to the next prompt are its output.
fn console_commands(block: &Block) -> Result<Vec<Command>, String> {
    let mut out: Vec<Command> = Vec::new();
    let mut continued = false;
    for (line, text) in &block.body {
        if continued {
            if let Some(last) = out.last_mut() {
                last.text.push('\n');
                last.text.push_str(text);
                continued = !complete(&last.text);
            }
            continue;
        }
        if let Some(command) = text.strip_prefix("$ ") {
            continued = !complete(command);
            out.push(Command {
                line: *line,
                text: command.to_string(),
                shown: None,
            });
            continue;
        }
        let Some(last) = out.last_mut() else {
            return Err(format!("line {line}: output before the first `$ ` command"));
        };
        let shown = last.shown.get_or_insert_with(String::new);
        if !shown.is_empty() || !text.is_empty() {
            if !shown.is_empty() {
                shown.push('\n');
            }
            shown.push_str(text);
        }
    }
    if continued {
        return Err("the last command never ends".into());
    }
    for command in &mut out {
        if command.shown.as_deref().is_some_and(|s| s.trim().is_empty()) {
            command.shown = None;
        }
    }
    Ok(out)
}

/// Whether shell text is a whole command: no quote left open, no trailing
/// `\`, no compound command left open (`for … do` without its `done`,
/// `if` without `fi`, `case` without `esac`, `{` without `}`). A `#`
/// outside quotes after a blank starts a comment.
fn complete(text: &str) -> bool {
    #[derive(PartialEq)]
    enum In {
        Code,
        Single,
        Double,
        Comment,
    }
    let mut state = In::Code;
    let mut chars = text.chars();
    let mut prev_blank = true;
    let mut trailing_backslash = false;
    // Compound commands opened and not yet closed, by their words.
    let mut depth = 0i32;
    let mut word = String::new();
    let mut end_word = |word: &mut String| {
        depth += match word.as_str() {
            "do" | "if" | "case" | "{" => 1,
            "done" | "fi" | "esac" | "}" => -1,
            _ => 0,
        };
        word.clear();
    };
    while let Some(c) = chars.next() {
        match state {
            In::Comment => {
                if c == '\n' {
                    state = In::Code;
                }
            }
            In::Single => {
                if c == '\'' {
                    state = In::Code;
                }
            }
            In::Double => match c {
                '\\' => {
                    chars.next();
                }
                '"' => state = In::Code,
                _ => {}
            },
            In::Code => match c {
                '\\' => trailing_backslash = chars.next().is_none(),
                '\'' => state = In::Single,
                '"' => state = In::Double,
                '#' if prev_blank => state = In::Comment,
                c if c.is_whitespace() || ";|&()<>".contains(c) => end_word(&mut word),
                c => word.push(c),
            },
        }
        if state != In::Code {
            end_word(&mut word);
        }
        prev_blank = c.is_whitespace();
    }
    end_word(&mut word);
    matches!(state, In::Code | In::Comment) && !trailing_backslash && depth <= 0
}

/// Whether `actual` is what `shown` shows: line by line, runs of blanks
/// as one (a table's columns widen with our addresses), `...` standing
/// for any text (within a line, or whole lines), and a time of day
/// (`12:00:01.234`) or an RFC 3339 time standing for any such time.
pub fn matches(shown: &str, actual: &str) -> bool {
    let norm = |s: &str| {
        s.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
            .trim_matches('\n')
            .to_string()
    };
    let mut pattern = String::from("(?s)^");
    for (i, part) in norm(shown).split("...").enumerate() {
        if i > 0 {
            pattern.push_str(".*?");
        }
        pattern.push_str(&any_time(&regex::escape(part)));
    }
    pattern.push('$');
    regex::Regex::new(&pattern).is_ok_and(|re| re.is_match(&norm(actual)))
}

/// In an escaped pattern, every time shown stands for any time.
fn any_time(escaped: &str) -> String {
    let rfc3339 =
        regex::Regex::new(r"\d{4}\\-\d\d\\-\d\dT\d\d:\d\d:\d\d(\\.\d+)?Z").expect("a valid pattern");
    let clock = regex::Regex::new(r"\b\d\d:\d\d:\d\d\\.\d\d\d\b").expect("a valid pattern");
    let escaped = rfc3339.replace_all(escaped, r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z");
    clock
        .replace_all(&escaped, r"\d\d:\d\d:\d\d\.\d\d\d")
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(md: &str) -> Block {
        blocks(md).into_iter().next().expect("a block")
    }

    #[test]
    fn a_shell_block_must_say_whether_it_runs() {
        assert_eq!(kind(&block("```sh run\nls\n```\n")), Ok(Kind::Run));
        assert_eq!(kind(&block("```sh norun\nls\n```\n")), Ok(Kind::Shown));
        assert!(kind(&block("```sh\nls\n```\n")).is_err());
        assert!(kind(&block("```\n$ tartan step ls\n```\n")).is_err());
        assert!(kind(&block("```json run\n{}\n```\n")).is_err());
        assert_eq!(kind(&block("```json\n{}\n```\n")), Ok(Kind::NotShell));
    }

    #[test]
    fn sh_commands_span_quotes_and_backslashes_and_take_the_comments_after_them() {
        let b = block(
            "```sh run\ncurl -d '{\"a\":\n  1}' x   # trailing\n# {\"ok\":true}\n# more\n\
             echo a \\\n  b\necho '#not a comment'\n```\n",
        );
        let got = commands(&b).expect("commands");
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].text, "curl -d '{\"a\":\n  1}' x   # trailing");
        assert_eq!(got[0].shown.as_deref(), Some("{\"ok\":true}\nmore"));
        assert_eq!(got[1].text, "echo a \\\n  b");
        assert_eq!(got[1].shown, None);
        assert_eq!(got[2].line, 8);
        assert!(commands(&block("```sh run\necho 'open\n```\n")).is_err());
        let looped = block("```sh run\nfor n in 1 2; do\n  echo \"$n done\"\ndone\n# 1 done\n```\n");
        let got = commands(&looped).expect("commands");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].shown.as_deref(), Some("1 done"));
    }

    #[test]
    fn console_commands_take_the_lines_up_to_the_next_prompt() {
        let b =
            block("```console run\n$ tartan step ls\nID  NAME\ngreet  Greet\n$ tartan step rm greet\n```\n");
        let got = commands(&b).expect("commands");
        assert_eq!(got[0].shown.as_deref(), Some("ID  NAME\ngreet  Greet"));
        assert_eq!(got[1].shown, None);
    }

    #[test]
    fn shown_output_matches_with_ellipses_and_only_so() {
        assert!(matches("{\"a\":1,...}", "{\"a\":1,\"b\":2}"));
        assert!(matches(
            "started flow ...\n...\nresult: x",
            "started flow 0b7e\nline\nline\nresult: x"
        ));
        assert!(matches("a  \n", "a"));
        assert!(matches("ID  NAME\ngreet  Greet", "ID     NAME\ngreet  Greet"));
        assert!(matches(
            "12:00:01.234 flow x started",
            "04:53:55.340 flow x started"
        ));
        assert!(matches(
            "until 2026-11-23T12:00:01.234567Z",
            "until 2026-11-28T04:53:55.340009Z"
        ));
        assert!(!matches(
            "12:00:01.234 flow x started",
            "04:53:55.340 flow y started"
        ));
        assert!(!matches("{\"a\":1}", "{\"a\":2}"));
        assert!(!matches("a...b", "a"));
        assert!(!matches("HELLO", "HELLO\nextra"));
    }
}
