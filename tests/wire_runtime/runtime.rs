//! A test-only agent runtime for `rehearsal drive` (tests/suite/drive.rs): a std-only HTTP
//! client of `OPENAI_BASE_URL` that does one thing per mode, so the tests need no Python.
//!
//! `rehearsal-test-runtime MODE [MESSAGE]`:
//! - `ask MESSAGE`: one non-streamed chat completion: the conversation so far (kept in
//!   `history.json` of the working directory, which drive keeps across a scenario's turns)
//!   and MESSAGE as the new user message; prints the reply's text on stdout, exits 0 (1 and
//!   the error on stderr if the reply is an error).
//! - `grandchild MESSAGE`: starts `sleep 300` (writing its pid to `$TEST_RUNTIME_PID_FILE`),
//!   then as `ask`, and exits leaving the sleeper behind.
//! - `hang MESSAGE`: as `ask`, then sleeps for 300 s.
//! - `die`: aborts (SIGABRT) without calling.
//! - `silent`: exits 0 without calling.

use std::io::{Read, Write};
use std::net::TcpStream;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    let message = args.get(2).cloned().unwrap_or_default();
    match mode {
        "ask" => std::process::exit(ask(&message)),
        "grandchild" => {
            let child = std::process::Command::new("sleep").arg("300").spawn().expect("sleep starts");
            if let Ok(file) = std::env::var("TEST_RUNTIME_PID_FILE") {
                std::fs::write(file, child.id().to_string()).expect("pid file written");
            }
            std::process::exit(ask(&message));
        }
        "hang" => {
            ask(&message);
            std::thread::sleep(std::time::Duration::from_secs(300));
        }
        "die" => {
            eprintln!("rehearsal-test-runtime: dying on purpose");
            std::process::abort();
        }
        "silent" => {}
        other => {
            eprintln!("rehearsal-test-runtime: unknown mode {other:?}");
            std::process::exit(2);
        }
    }
}

fn ask(message: &str) -> i32 {
    let base = std::env::var("OPENAI_BASE_URL").expect("OPENAI_BASE_URL is set");
    let rest = base.strip_prefix("http://").expect("an http:// base URL");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut history: Vec<serde_json::Value> =
        std::fs::read_to_string("history.json").ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    history.push(serde_json::json!({"role": "user", "content": message}));
    let body = serde_json::json!({
        "model": std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "rehearsal".into()),
        "messages": history,
    })
    .to_string();
    let mut stream = TcpStream::connect(host).expect("the server accepts");
    write!(
        stream,
        "POST /{path}/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("request sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer read");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    if status != 200 {
        eprintln!("rehearsal-test-runtime: HTTP {status}: {body}");
        return 1;
    }
    let text = json["choices"][0]["message"]["content"].as_str().unwrap_or("").to_string();
    history.push(serde_json::json!({"role": "assistant", "content": text}));
    std::fs::write("history.json", serde_json::Value::from(history).to_string()).expect("history written");
    println!("{text}");
    0
}
