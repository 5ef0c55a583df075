//! The shared model host (`model.shared`), end to end: real language servers over stdio, each
//! starting or finding the host as an editor's would, the real test model, a sandbox of their
//! own (`XDG_RUNTIME_DIR` for the socket, `XDG_CACHE_HOME` for the host's log).
//!
//! - three windows at once share one host: one model load (the host's log says "model ready"
//!   once, and `ghostline doctor` sees three windows), and every answer is the in-process one;
//! - a host killed (SIGKILL) mid-request: the window answers from its own model and says why;
//!   the next window starts a new host (or finds the one the first window started again after
//!   its back-off), and the first window rejoins it: its answers come from the host again (the
//!   host counts two windows) and are still the in-process ones;
//! - a window's key is answered while another window's job runs (held in the host, as a long
//!   generation would be): the windows' jobs run at once on the CPU, each on its own context;
//! - a socket open to others (0666) or owned by another uid is never connected to.
//!
//! Other tests' servers run in-process: `stdio_client` sets `GHOSTLINE_SHARED=off`, and only
//! these ask for `model.shared` in their settings.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use ghostline::stdio_client::StdioClient;
use serde_json::{json, Value};

/// A folder for one test: the runtime folder (sockets) and the cache folder (host logs).
struct Sandbox {
    root: PathBuf,
    /// The folder, removed once the hosts are ended (`None` in a window thread's copy).
    _dir: Option<TempDir>,
}

impl Sandbox {
    fn new(name: &str) -> Sandbox {
        let dir = TempDir::new(&format!("shared-{name}"));
        std::fs::create_dir_all(dir.join("run")).unwrap();
        Sandbox { root: dir.to_path_buf(), _dir: Some(dir) }
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("GHOSTLINE_MODEL".into(), String::new()),
            ("XDG_RUNTIME_DIR".into(), self.root.join("run").display().to_string()),
            ("XDG_CACHE_HOME".into(), self.root.join("cache").display().to_string()),
            ("XDG_DATA_HOME".into(), self.root.join("data").display().to_string()),
        ]
    }

    /// Starts a language server; `extra` adds to its environment.
    fn server(&self, settings: &Value, extra: &[(&str, &str)]) -> StdioClient {
        let env = self.env();
        let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        all.extend_from_slice(extra);
        let mut client = StdioClient::spawn(&binary(), &["lsp"], &all, Stdio::inherit()).unwrap();
        initialize(&mut client, json!({}), settings.clone());
        wait_ready(&mut client);
        client
    }

    fn sockets(&self) -> Vec<PathBuf> {
        self.files(&self.root.join("run/ghostline"), ".sock")
    }

    /// The hosts' logs, all of them read together.
    fn host_logs(&self) -> String {
        self.files(&self.root.join("cache/ghostline"), ".log").iter().map(|p| std::fs::read_to_string(p).unwrap()).collect()
    }

    fn files(&self, dir: &Path, ending: &str) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        entries.flatten().map(|e| e.path()).filter(|p| p.to_string_lossy().ends_with(ending)).collect()
    }

    /// The pid of the host holding the lock (the lock file names it).
    fn host_pid(&self) -> i32 {
        let locks = self.files(&self.root.join("run/ghostline"), ".lock");
        assert_eq!(locks.len(), 1, "{locks:?}");
        std::fs::read_to_string(&locks[0]).unwrap().trim().parse().unwrap()
    }

    fn wait_for_log(&self, what: &str, within: Duration) {
        let until = Instant::now() + within;
        while !self.host_logs().contains(what) {
            assert!(Instant::now() < until, "the host's log never said {what:?}:\n{}", self.host_logs());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // A host outlives its windows by its linger time: end the ones these tests started.
        for lock in self.files(&self.root.join("run/ghostline"), ".lock") {
            if let Ok(pid) = std::fs::read_to_string(&lock).unwrap_or_default().trim().parse::<i32>() {
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

fn settings(shared: bool) -> Value {
    json!({
        // No `keepAlive`: it would unload the in-process models between requests too; the host
        // lingers its default 30 s, and the sandbox ends it.
        "model": {"path": model(), "threads": 1, "shared": shared},
        "completion": {"typedAhead": false, "generateAhead": false},
        "stats": {"enabled": false}
    })
}

/// Prompts: the start of the inventory fixture cut after a few of its lines, an indentation
/// typed on the next, the cursor at the end (where every request is a generation).
fn cases() -> Vec<String> {
    let (text, _, _) = fixture_with_cursor("traces/inventory.py");
    let lines: Vec<&str> = text.lines().collect();
    let cut = |after: &str, indent: &str| {
        let at = lines.iter().position(|l| l.contains(after)).unwrap_or_else(|| panic!("{after:?} in the fixture"));
        format!("{}\n{indent}", lines[..=at].join("\n"))
    };
    vec![
        cut("Return the value of everything in stock", "        "),
        cut("if item.sku in self.items:", "            "),
        cut("Take quantity units of sku out of stock", "        "),
        cut("def report(store):", "    "),
        // A word begun: left out of the prompt, and the host's model thread writes it whole
        // (`Prompt::lead`) as the in-process one does.
        cut("def report(store):", "    for item in sor"),
    ]
}

/// One request's answer: the case, the suggestion, where it was generated, and what the model
/// saw and did (the prompt's tokens and the tokens generated: the stop rule ends the generation
/// where in-process it would, not only the suggestion shown).
type Answer = (usize, String, Option<String>, (Value, Value));

/// Opens every case (one document each) and asks each in `order`.
fn ask(client: &mut StdioClient, window: &str, order: &[usize]) -> Vec<Answer> {
    let texts = cases();
    order
        .iter()
        .map(|&i| {
            let uri = format!("file:///{window}/case{i}.py");
            open(client, &uri, &texts[i]);
            let lines: Vec<&str> = texts[i].split('\n').collect();
            let r = inline_completion(client, &uri, lines.len() as u32 - 1, lines.last().unwrap().len() as u32);
            let text = inline_text(&r);
            let last = client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap()["result"].clone();
            let t = &last["timings"];
            (i, text, t["backend"].as_str().map(str::to_owned), (last["prompt"].clone(), t["generated_tokens"].clone()))
        })
        .collect()
}

/// The in-process answers (no host), by case: the suggestion, the prompt and tokens generated.
fn in_process(sandbox: &Sandbox) -> Vec<(String, (Value, Value))> {
    let mut client = sandbox.server(&settings(false), &[]);
    let order: Vec<usize> = (0..cases().len()).collect();
    let answers = ask(&mut client, "w", &order);
    assert!(answers.iter().all(|(_, _, b, _)| b.is_none()), "in-process, no backend named: {answers:?}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
    assert!(sandbox.sockets().is_empty(), "an in-process server started a host");
    answers.into_iter().map(|(_, t, _, seen)| (t, seen)).collect()
}

#[test]
fn three_windows_share_one_model_load_and_answer_as_in_process() {
    let sandbox = Sandbox::new("three");
    let expected = in_process(&sandbox);
    assert!(expected.iter().filter(|(t, _)| !t.is_empty()).count() >= 2, "most cases get a suggestion: {expected:?}");
    assert!(!expected[4].0.is_empty(), "the word begun gets a suggestion: {expected:?}");
    let n = cases().len();
    // Three windows start together (racing to start the host), then each asks every case in
    // its own order while the others ask theirs.
    let both = std::sync::Arc::new(std::sync::Barrier::new(4));
    let windows: Vec<_> = (0..3)
        .map(|w| {
            let (sandbox_root, both) = (sandbox.root.clone(), both.clone());
            std::thread::spawn(move || {
                let sandbox = Sandbox { root: sandbox_root, _dir: None };
                let mut client = sandbox.server(&settings(true), &[]);
                both.wait(); // all three connected
                let order: Vec<usize> = (0..n).map(|i| (i + w) % n).collect();
                let answers = ask(&mut client, &format!("w{w}"), &order);
                both.wait(); // the doctor looks while all three are connected
                both.wait();
                assert!(client.shutdown(TIMEOUT).unwrap().success());
                std::mem::forget(sandbox); // the test's own sandbox ends the host
                answers
            })
        })
        .collect();
    both.wait();
    both.wait();
    let doctor = doctor(&sandbox);
    assert_eq!(sandbox.sockets().len(), 1, "one host socket");
    both.wait();
    let answers: Vec<_> = windows.into_iter().map(|w| w.join().unwrap()).collect();
    for (w, window) in answers.iter().enumerate() {
        for (i, text, backend, seen) in window {
            assert_eq!(backend.as_deref(), Some("host"), "window {w}, case {i}: not answered by the host");
            assert_eq!(text, &expected[*i].0, "window {w}, case {i}: the host's answer is not the in-process one");
            assert_eq!(seen.0, expected[*i].1 .0, "window {w}, case {i}: not the in-process prompt");
            assert_eq!(seen.1, expected[*i].1 .1, "window {w}, case {i}: the generation did not stop where in-process it does");
        }
    }
    // One model load: one host, whose log says "model ready" once, with three windows.
    let logs = sandbox.host_logs();
    assert_eq!(logs.matches("model ready").count(), 1, "one model load:\n{logs}");
    assert!(logs.contains("windows=3"), "three windows connected at once:\n{logs}");
    let host = &doctor["facts"]["shared_host"];
    assert_eq!(host["windows"], 3, "doctor: {doctor}");
    assert_eq!(host["pid"], sandbox.host_pid(), "doctor: {doctor}");
    assert!(host["rss_bytes"].as_u64().unwrap() > 0, "doctor: {doctor}");
}

/// `ghostline doctor --no-load --json` with the shared settings in the sandbox.
fn doctor(sandbox: &Sandbox) -> Value {
    let file = sandbox.root.join("settings.json");
    std::fs::write(&file, settings(true).to_string()).unwrap();
    let mut command = std::process::Command::new(binary());
    command.args(["doctor", "--no-load", "--json", "--settings"]).arg(&file);
    for (k, v) in sandbox.env() {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("doctor's JSON: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// A window whose host (started by it) holds its first job until the returned file exists; the
/// window asks case 0 on a thread of its own, which gives the client and its answers back.
/// Returns once the host's log says the job is held.
fn held_request(sandbox: &Sandbox) -> (PathBuf, std::thread::JoinHandle<(StdioClient, Vec<Answer>)>) {
    let released = sandbox.root.join("released");
    let hold = format!("host-job={}", released.display());
    let mut client = sandbox.server(&settings(true), &[("GHOSTLINE_HOLD", &hold)]);
    let asked = std::thread::spawn(move || {
        let answers = ask(&mut client, "w", &[0]);
        (client, answers)
    });
    sandbox.wait_for_log("held at `host-job`", TIMEOUT);
    (released, asked)
}

#[test]
fn a_host_killed_mid_request_is_survived_in_process_then_the_window_rejoins_the_next_host() {
    let sandbox = Sandbox::new("killed");
    let expected = in_process(&sandbox);
    // The host holds its first job until a file that appears only once it has been killed there
    // (a host this window starts later inherits the hold, and passes it).
    let (released, asked) = held_request(&sandbox);
    let pid = sandbox.host_pid();
    unsafe { libc::kill(pid, libc::SIGKILL) };
    std::fs::write(&released, "").unwrap();
    let (mut client, answers) = asked.join().unwrap();
    let (_, answer, backend, _) = &answers[0];
    let backend = backend.as_deref().unwrap_or("");
    assert!(backend.starts_with("local: ") && backend.contains("stopped mid-request"), "{backend}");
    assert_eq!(answer, &expected[0].0, "the fallback's answer is the in-process one");
    // Right after, the window answers from its own model (it looks for a host again only after
    // its back-off, and never waits for one to load).
    let later = ask(&mut client, "w", &[1]);
    assert!(later[0].2.as_deref().is_some_and(|b| b.starts_with("local: ")), "{later:?}");
    assert_eq!(later[0].1, expected[1].0);
    // The next window finds the dead host's socket and starts a new host (or finds the one the
    // first window started meanwhile).
    let mut next = sandbox.server(&settings(true), &[]);
    let again = ask(&mut next, "w", &[0]);
    assert_eq!(again[0].2.as_deref(), Some("host"), "{again:?}");
    assert_eq!(again[0].1, expected[0].0);
    assert_ne!(sandbox.host_pid(), pid, "a new host");
    // The first window rejoins it once its back-off has passed: its answers come from the host
    // again, and are the in-process ones.
    let until = Instant::now() + Duration::from_secs(60);
    let mut round = 0;
    let rejoined = loop {
        round += 1;
        let answers = ask(&mut client, &format!("r{round}"), &[0, 2]);
        if answers.iter().all(|(_, _, b, _)| b.as_deref() == Some("host")) {
            break answers;
        }
        assert!(Instant::now() < until, "the window never rejoined the host: {answers:?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    for (i, text, _, seen) in &rejoined {
        assert_eq!(text, &expected[*i].0, "case {i}: the host's answer after rejoining is not the in-process one");
        assert_eq!(seen, &expected[*i].1, "case {i}: not the in-process prompt and generation");
    }
    let doctor = doctor(&sandbox);
    assert_eq!(doctor["facts"]["shared_host"]["windows"], 2, "both windows on the new host: {doctor}");
    assert_eq!(doctor["facts"]["shared_host"]["pid"], sandbox.host_pid(), "{doctor}");
    let logs = sandbox.host_logs();
    assert_eq!(logs.matches("model ready").count(), 2, "one load for the first host, one for the new one:\n{logs}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
    assert!(next.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn a_window_is_answered_while_another_windows_job_runs() {
    let sandbox = Sandbox::new("at-once");
    let expected = in_process(&sandbox);
    // Window B starts the host, which holds B's first job (and only it) until the file exists.
    let (released, asked) = held_request(&sandbox);
    // Window A's keys are answered by the host meanwhile, as in-process.
    let mut a = sandbox.server(&settings(true), &[]);
    let answers = ask(&mut a, "a", &[1, 3]);
    assert!(!sandbox.host_logs().contains("released at `host-job`"), "B's job was still held:\n{}", sandbox.host_logs());
    for (i, text, backend, seen) in &answers {
        assert_eq!(backend.as_deref(), Some("host"), "case {i}: {answers:?}");
        assert_eq!(text, &expected[*i].0, "case {i}: not the in-process answer");
        assert_eq!(seen, &expected[*i].1, "case {i}: not the in-process prompt and generation");
    }
    std::fs::write(&released, "").unwrap();
    let (b, held) = asked.join().unwrap();
    assert_eq!(held[0].2.as_deref(), Some("host"), "{held:?}");
    assert_eq!(held[0].1, expected[0].0, "the held job's answer is the in-process one");
    let logs = sandbox.host_logs();
    assert_eq!(logs.matches("model ready").count(), 1, "{logs}");
    assert!(a.shutdown(TIMEOUT).unwrap().success());
    assert!(b.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn a_socket_open_to_others_or_owned_by_another_user_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new("refused");
    let mut first = sandbox.server(&settings(true), &[]);
    assert_eq!(ask(&mut first, "w", &[0])[0].2.as_deref(), Some("host"));
    let socket = sandbox.sockets().pop().expect("the host's socket");
    assert_eq!(std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(socket.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
    let connected = || sandbox.host_logs().matches("a window connected").count();
    assert_eq!(connected(), 1);

    let refused = |why: &str| {
        let mut window = sandbox.server(&settings(true), &[]);
        let answer = ask(&mut window, "w", &[0]);
        let backend = answer[0].2.clone().unwrap_or_default();
        assert!(backend.starts_with("local: no shared model host (refused the socket") && backend.contains(why), "{backend}");
        assert!(window.shutdown(TIMEOUT).unwrap().success());
    };
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    refused("mode 0666");
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&socket, Some(12345), None).unwrap();
    refused("belongs to uid 12345");
    assert_eq!(connected(), 1, "a refused socket was connected to:\n{}", sandbox.host_logs());
    assert!(first.shutdown(TIMEOUT).unwrap().success());
}
