//! The per-request cost of `rehearsal serve`, side by side with a bare axum server in the same
//! process: both on 127.0.0.1 port 0, both answering the same non-streamed chat completion,
//! driven by the same keep-alive HTTP/1.1 client over one connection, rounds interleaved so
//! that the shared machine's noise falls on both alike.
//!
//! `cargo bench --bench wire` (or `cargo bench --bench wire -- 5000` for 5,000 requests a
//! round). It prints µs per request for each server, per round, and the median of the rounds.
//! What the difference buys: each request parsed into the conversation types, put down to an
//! agent by the attribution, answered from its lane (lane binding, `when`, checks), and
//! recorded with its wall times for the oracles.

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use rehearsal::dialect::Dialect;
use rehearsal::wire::{End, ServeOptions, Server};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const SCENARIO: &str = r#"{
  "name": "wire-bench",
  "lanes": [{"agent": "main", "replies": [{"text": "The logs show nothing unusual.", "repeatable": true}]}],
  "turns": [{"user": "Check the logs"}]
}"#;

const REQUEST: &str = r#"{"model":"m","messages":[{"role":"system","content":"You are the root."},{"role":"user","content":"Check the logs"}],"tools":[{"type":"function","function":{"name":"Agent","parameters":{"type":"object"}}}]}"#;

/// What rehearsal answers REQUEST with: the bare server sends the same bytes.
const ANSWER: &str = r#"{"id":"chatcmpl-0","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"The logs show nothing unusual."},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":8,"total_tokens":16}}"#;

/// Sends `n` requests over one keep-alive connection; the wall time per request.
async fn drive(addr: std::net::SocketAddr, n: usize) -> Duration {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{REQUEST}",
        REQUEST.len()
    );
    let start = Instant::now();
    let mut line = String::new();
    for _ in 0..n {
        write.write_all(request.as_bytes()).await.expect("write");
        let mut length = 0;
        loop {
            line.clear();
            read.read_line(&mut line).await.expect("read");
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().expect("a length");
            }
        }
        let mut body = vec![0; length];
        read.read_exact(&mut body).await.expect("body");
        assert!(body.starts_with(b"{\"id\""), "{}", String::from_utf8_lossy(&body));
    }
    start.elapsed() / n as u32
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    let n: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(2000);
    let rounds = 7;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let bare = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let bare_addr = bare.local_addr().expect("addr");
        let app = Router::new().route(
            "/v1/chat/completions",
            post(|_body: axum::body::Bytes| async { ([("content-type", "application/json")], ANSWER) }),
        );
        tokio::spawn(async move { axum::serve(bare, app).await.expect("serve") });
        let scenario = rehearsal::scenario::parse(std::path::Path::new("wire-bench.json"), SCENARIO).expect("scenario");
        let options = ServeOptions { time_scale: 0.0, created_s: Some(0), ..ServeOptions::default() };
        let dialect = Dialect::builtin("roku").expect("dialect");
        let (mut served, mut bare_times) = (Vec::new(), Vec::new());
        for round in 1..=rounds {
            // A fresh server a round, so each round's record starts empty.
            let server = Server::start(&scenario, dialect.clone(), options.clone()).await.expect("start");
            let s = drive(server.addr(), n).await;
            let b = drive(bare_addr, n).await;
            let run = server.finish(End::Caller).await;
            assert_eq!(run.side.exchanges.len(), n, "every request recorded");
            println!(
                "round {round}: serve {:.1} µs/request, bare axum {:.1} µs/request ({n} requests each)",
                s.as_secs_f64() * 1e6,
                b.as_secs_f64() * 1e6
            );
            served.push(s);
            bare_times.push(b);
        }
        let (s, b) = (median(served), median(bare_times));
        println!(
            "median of {rounds}: serve {:.1} µs/request, bare axum {:.1} µs/request: serve costs {:.1} µs more a request ({:.2}x)",
            s.as_secs_f64() * 1e6,
            b.as_secs_f64() * 1e6,
            (s.as_secs_f64() - b.as_secs_f64()) * 1e6,
            s.as_secs_f64() / b.as_secs_f64()
        );
    });
}
