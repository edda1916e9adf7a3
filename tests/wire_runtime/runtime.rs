//! A test-only agent runtime for `rehearsal drive` (tests/suite/wire/drive.rs): a std-only HTTP
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
//! - `titled MESSAGE`: first a side request (system `Write a title for the conversation.`,
//!   MESSAGE as the user message; the answer's text on stderr as `title: TEXT`), then as `ask`.
//! - `fanout MESSAGE` (for `rehearsal record`'s tests, dialect `bub-0.5.1`): the root asks
//!   with the tool `subagent{prompt}`; the children of one reply run at once, each on its own
//!   thread, asking with the tool `lookup{q}` (answered `looked up: Q`) until a reply without
//!   calls, whose text is the call's result; the root's final text goes to stdout.
//!
//! Environment: `OPENAI_API_KEY` is sent as `Authorization: Bearer KEY`; with
//! `TEST_RUNTIME_KEY_IN_BODY=1` the key is also written into the body (an `api_key` field and
//! the first user message), as a careless runtime might. `TEST_RUNTIME_STREAM=1` asks for
//! streamed answers (SSE over chunked transfer encoding, decoded here). `TEST_RUNTIME_TIMEOUT_MS`
//! gives up on an answer after that long (exit 1). `TEST_RUNTIME_VARIANT=v2` changes one
//! thing: the `lookup` result of `config` reads `looked up (v2): config`, altering one request
//! (a code change, for the replay's failure); `TEST_RUNTIME_VARIANT=swap` hands the root the
//! children's results in reverse call order (a broken rule: each call's result must be its
//! own child's final text). `TEST_RUNTIME_API=anthropic` makes `ask` speak the Anthropic
//! Messages API instead, as Claude-based runtimes do: `POST /v1/messages?beta=true` of
//! `ANTHROPIC_BASE_URL` (an origin: no `/v1`), `x-api-key` from `ANTHROPIC_API_KEY` (the key
//! `TEST_RUNTIME_KEY_IN_BODY=1` writes into the message) and `anthropic-version`, the reply's
//! `text` blocks as its text; with `TEST_RUNTIME_STREAM=1` streamed (`text_delta`s, an error
//! unless `message_stop` came), and `TEST_RUNTIME_TIMEOUT_MS` as over Chat.
//! `TEST_RUNTIME_API=responses` makes `ask` speak the OpenAI Responses API: `POST
//! {OPENAI_BASE_URL}/responses`, the first turn with the history as `input`, each later turn
//! with only the new user message and `previous_response_id` (the last answer's id, kept in
//! `response_id` of the working directory), the reply's `output_text` parts as its text (not
//! streamed).

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
        // A side request first, as runtimes that title their conversations make: a request
        // under its own system text, its answer on stderr; then the turn as `ask`.
        "titled" => {
            let title = vec![
                serde_json::json!({"role": "system", "content": "Write a title for the conversation."}),
                serde_json::json!({"role": "user", "content": message}),
            ];
            match chat(&title, &[]) {
                Ok(answer) => eprintln!("title: {}", answer.text),
                Err(why) => eprintln!("title: none ({why})"),
            }
            std::process::exit(ask(&message));
        }
        "fanout" => std::process::exit(fanout(&message)),
        other => {
            eprintln!("rehearsal-test-runtime: unknown mode {other:?}");
            std::process::exit(2);
        }
    }
}

fn ask(message: &str) -> i32 {
    let mut history: Vec<serde_json::Value> =
        std::fs::read_to_string("history.json").ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    history.push(serde_json::json!({"role": "user", "content": with_key(message)}));
    let answer = match std::env::var("TEST_RUNTIME_API").as_deref() {
        Ok("anthropic") => messages(&history),
        Ok("responses") => responses(&history),
        _ => chat(&history, &[]),
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(why) => {
            eprintln!("rehearsal-test-runtime: {why}");
            return 1;
        }
    };
    history.push(serde_json::json!({"role": "assistant", "content": answer.text}));
    std::fs::write("history.json", serde_json::Value::from(history).to_string()).expect("history written");
    println!("{}", answer.text);
    0
}

/// The first user message, with the key appended when the runtime is told to leak it.
fn with_key(message: &str) -> String {
    let var = if std::env::var("TEST_RUNTIME_API").as_deref() == Ok("anthropic") {
        "ANTHROPIC_API_KEY"
    } else {
        "OPENAI_API_KEY"
    };
    match (std::env::var("TEST_RUNTIME_KEY_IN_BODY").as_deref(), std::env::var(var)) {
        (Ok("1"), Ok(key)) => format!("{message} (api key {key})"),
        _ => message.to_string(),
    }
}

struct Answer {
    text: String,
    /// id, name, arguments text.
    calls: Vec<(String, String, String)>,
}

fn tool(name: &str, arg: &str) -> serde_json::Value {
    serde_json::json!({"type": "function", "function": {"name": name, "description": name,
        "parameters": {"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]}}})
}

fn fanout(message: &str) -> i32 {
    let mut history = vec![serde_json::json!({"role": "user", "content": with_key(message)})];
    let tools = [tool("subagent", "prompt")];
    loop {
        let answer = match chat(&history, &tools) {
            Ok(answer) => answer,
            Err(why) => {
                eprintln!("rehearsal-test-runtime: {why}");
                return 1;
            }
        };
        if answer.calls.is_empty() {
            println!("{}", answer.text);
            return 0;
        }
        history.push(assistant(&answer));
        // The reply's children run at once (bub 0.5.1 gathers them); results in call order.
        let children: Vec<_> = answer
            .calls
            .iter()
            .map(|(_, name, args)| {
                let prompt = serde_json::from_str::<serde_json::Value>(args).unwrap_or_default()["prompt"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let name = name.clone();
                std::thread::spawn(move || {
                    if name == "subagent" { child(&prompt) } else { format!("Tool `{name}` does not exist.") }
                })
            })
            .collect();
        let mut results: Vec<String> =
            children.into_iter().map(|c| c.join().unwrap_or_else(|_| "Error: the child panicked".into())).collect();
        if std::env::var("TEST_RUNTIME_VARIANT").as_deref() == Ok("swap") {
            results.reverse();
        }
        for ((id, _, _), result) in answer.calls.iter().zip(results) {
            history.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": result}));
        }
    }
}

fn child(prompt: &str) -> String {
    let mut history = vec![serde_json::json!({"role": "user", "content": prompt})];
    let tools = [tool("lookup", "q")];
    loop {
        let answer = match chat(&history, &tools) {
            Ok(answer) => answer,
            Err(why) => return format!("Error: {why}"),
        };
        if answer.calls.is_empty() {
            return answer.text;
        }
        history.push(assistant(&answer));
        for (id, _, args) in &answer.calls {
            let q = serde_json::from_str::<serde_json::Value>(args).unwrap_or_default()["q"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let v2 = std::env::var("TEST_RUNTIME_VARIANT").as_deref() == Ok("v2") && q == "config";
            let result = if v2 { format!("looked up (v2): {q}") } else { format!("looked up: {q}") };
            history.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": result}));
        }
    }
}

fn assistant(answer: &Answer) -> serde_json::Value {
    let calls: Vec<serde_json::Value> = answer
        .calls
        .iter()
        .map(|(id, name, args)| serde_json::json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    serde_json::json!({"role": "assistant", "content": answer.text, "tool_calls": calls})
}

/// One chat completion over a fresh connection: the answer's text and calls, or the error.
fn chat(messages: &[serde_json::Value], tools: &[serde_json::Value]) -> Result<Answer, String> {
    let base = std::env::var("OPENAI_BASE_URL").expect("OPENAI_BASE_URL is set");
    let rest = base.strip_prefix("http://").expect("an http:// base URL");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let stream = std::env::var("TEST_RUNTIME_STREAM").as_deref() == Ok("1");
    let mut body = serde_json::json!({
        "model": std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "rehearsal".into()),
        "messages": messages,
    });
    if !tools.is_empty() {
        body["tools"] = serde_json::Value::from(tools.to_vec());
    }
    if stream {
        body["stream"] = true.into();
    }
    let key = std::env::var("OPENAI_API_KEY").ok();
    if let (Ok("1"), Some(key)) = (std::env::var("TEST_RUNTIME_KEY_IN_BODY").as_deref(), &key) {
        body["api_key"] = key.clone().into();
    }
    let body = body.to_string();
    let auth = key.map(|k| format!("Authorization: Bearer {k}\r\n")).unwrap_or_default();
    let mut conn = TcpStream::connect(host).map_err(|e| format!("cannot connect: {e}"))?;
    if let Some(ms) = std::env::var("TEST_RUNTIME_TIMEOUT_MS").ok().and_then(|t| t.parse().ok()) {
        conn.set_read_timeout(Some(std::time::Duration::from_millis(ms))).expect("a timeout is set");
    }
    write!(
        conn,
        "POST /{path}/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("cannot send: {e}"))?;
    let mut raw = Vec::new();
    if let Err(e) = conn.read_to_end(&mut raw) {
        if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) {
            return Err("timed out waiting for the model".into());
        }
        // A dropped connection: what came is judged below.
    }
    let answer = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)?
    } else {
        body.to_string()
    };
    if status != 200 {
        return Err(format!("HTTP {status}: {body}"));
    }
    if stream {
        return sse(&body);
    }
    let json: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("the answer is not JSON ({e}): {body:?}"))?;
    let message = &json["choices"][0]["message"];
    let text = message["content"].as_str().unwrap_or("").to_string();
    let calls = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
            (s(&c["id"]), s(&c["function"]["name"]), s(&c["function"]["arguments"]))
        })
        .collect();
    Ok(Answer { text, calls })
}

/// One Anthropic Messages request over a fresh connection (user and assistant messages whose
/// content is a string are the same in both APIs): the text of the reply's `text` blocks.
fn messages(history: &[serde_json::Value]) -> Result<Answer, String> {
    let base = std::env::var("ANTHROPIC_BASE_URL").expect("ANTHROPIC_BASE_URL is set");
    let host = base.strip_prefix("http://").expect("an http:// base URL").trim_end_matches('/');
    let stream = std::env::var("TEST_RUNTIME_STREAM").as_deref() == Ok("1");
    let mut body = serde_json::json!({"model": "rehearsal", "max_tokens": 1024, "messages": history});
    if stream {
        body["stream"] = true.into();
    }
    let body = body.to_string();
    let key = std::env::var("ANTHROPIC_API_KEY").unwrap_or_default();
    let mut conn = TcpStream::connect(host).map_err(|e| format!("cannot connect: {e}"))?;
    if let Some(ms) = std::env::var("TEST_RUNTIME_TIMEOUT_MS").ok().and_then(|t| t.parse().ok()) {
        conn.set_read_timeout(Some(std::time::Duration::from_millis(ms))).expect("a timeout is set");
    }
    write!(
        conn,
        "POST /v1/messages?beta=true HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nx-api-key: {key}\r\nanthropic-version: 2023-06-01\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("cannot send: {e}"))?;
    let mut raw = Vec::new();
    if let Err(e) = conn.read_to_end(&mut raw) {
        if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) {
            return Err("timed out waiting for the model".into());
        }
        // A dropped connection: what came is judged below.
    }
    let answer = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)?
    } else {
        body.to_string()
    };
    if status != 200 {
        return Err(format!("HTTP {status}: {body}"));
    }
    if stream {
        return message_events(&body);
    }
    let json: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("the answer is not JSON ({e}): {body:?}"))?;
    if json["type"] != "message" {
        return Err(format!("not a message: {body}"));
    }
    let text = json["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    Ok(Answer { text, calls: Vec::new() })
}

/// A Messages stream's events read into the answer's text; an error unless `message_stop` came.
fn message_events(body: &str) -> Result<Answer, String> {
    let mut text = String::new();
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else { continue };
        let event: serde_json::Value = serde_json::from_str(data).map_err(|e| format!("a bad event ({e})"))?;
        match event["type"].as_str() {
            Some("content_block_delta") => text.push_str(event["delta"]["text"].as_str().unwrap_or("")),
            Some("message_stop") => return Ok(Answer { text, calls: Vec::new() }),
            _ => {}
        }
    }
    Err(format!("the stream broke off after {text:?}"))
}

/// One OpenAI Responses request over a fresh connection: the whole history the first time,
/// then only the last message, chained to the last answer by `previous_response_id` (kept in
/// `response_id`); the text of the reply's `output_text` parts.
fn responses(history: &[serde_json::Value]) -> Result<Answer, String> {
    let base = std::env::var("OPENAI_BASE_URL").expect("OPENAI_BASE_URL is set");
    let rest = base.strip_prefix("http://").expect("an http:// base URL");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut body = serde_json::json!({"model": "rehearsal"});
    match std::fs::read_to_string("response_id") {
        Ok(id) => {
            body["previous_response_id"] = id.trim().into();
            body["input"] = serde_json::Value::from(history[history.len() - 1..].to_vec());
        }
        Err(_) => body["input"] = serde_json::Value::from(history.to_vec()),
    }
    let body = body.to_string();
    let key = std::env::var("OPENAI_API_KEY").unwrap_or_default();
    let mut conn = TcpStream::connect(host).map_err(|e| format!("cannot connect: {e}"))?;
    write!(
        conn,
        "POST /{path}/responses HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("cannot send: {e}"))?;
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).map_err(|e| format!("cannot read: {e}"))?;
    let answer = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)?
    } else {
        body.to_string()
    };
    if status != 200 {
        return Err(format!("HTTP {status}: {body}"));
    }
    let json: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("the answer is not JSON ({e}): {body:?}"))?;
    let Some(id) = json["id"].as_str().filter(|_| json["object"] == "response") else {
        return Err(format!("not a response: {body}"));
    };
    std::fs::write("response_id", id).map_err(|e| format!("cannot keep the response id: {e}"))?;
    let text = json["output"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().into_iter().flatten())
        .filter(|part| part["type"] == "output_text")
        .filter_map(|part| part["text"].as_str())
        .collect();
    Ok(Answer { text, calls: Vec::new() })
}

/// A chunked body decoded; an error if it broke off before its last chunk.
fn dechunk(mut body: &str) -> Result<String, String> {
    let mut out = String::new();
    loop {
        let Some((size, rest)) = body.split_once("\r\n") else {
            return Err(format!("the stream broke off after {out:?}"));
        };
        let size = usize::from_str_radix(size.trim(), 16).map_err(|_| format!("the stream broke off after {out:?}"))?;
        if size == 0 {
            return Ok(out);
        }
        if rest.len() < size {
            return Err(format!("the stream broke off after {out:?}"));
        }
        out.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
}

/// Server-sent chunks read into the answer; an error unless they end with `[DONE]`.
fn sse(body: &str) -> Result<Answer, String> {
    let mut text = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else { continue };
        if data == "[DONE]" {
            return Ok(Answer { text, calls });
        }
        let chunk: serde_json::Value = serde_json::from_str(data).map_err(|e| format!("a bad chunk ({e})"))?;
        let delta = &chunk["choices"][0]["delta"];
        text.push_str(delta["content"].as_str().unwrap_or(""));
        for c in delta["tool_calls"].as_array().into_iter().flatten() {
            let i = c["index"].as_u64().unwrap_or(0) as usize;
            while calls.len() <= i {
                calls.push(Default::default());
            }
            calls[i].0.push_str(c["id"].as_str().unwrap_or(""));
            calls[i].1.push_str(c["function"]["name"].as_str().unwrap_or(""));
            calls[i].2.push_str(c["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    Err(format!("the stream ended without [DONE] after {text:?}"))
}
