//! The per-request cost of `rehearsal serve`, side by side with a bare axum server in the same
//! process, for each API served: Chat Completions, Anthropic Messages and OpenAI Responses. Both servers on
//! 127.0.0.1 port 0, both answering the same non-streamed reply with the same bytes (the bare
//! server's answer is what `serve` answered the same request with, taken once at the start),
//! driven by the same keep-alive HTTP/1.1 client over one connection, rounds interleaved (per
//! round and API: `serve`, then bare) so that the shared machine's noise falls on both alike.
//!
//! `cargo bench --bench wire` (or `cargo bench --bench wire -- 5000` for 5,000 requests a
//! round). It prints µs per request for each server and API, per round, and the median of the
//! rounds with the ratio. What the difference buys: each request parsed into the conversation
//! types, put down to an agent by the attribution, answered from its lane (lane binding, `when`,
//! checks), and recorded with its wall times for the oracles.

use std::sync::Arc;
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

/// One API: its route and the request sent to it (the same conversation in each).
struct Api {
    name: &'static str,
    path: &'static str,
    request: &'static str,
}

const APIS: [Api; 3] = [
    Api {
        name: "Chat Completions",
        path: "/v1/chat/completions",
        request: r#"{"model":"m","messages":[{"role":"system","content":"You are the root."},{"role":"user","content":"Check the logs"}],"tools":[{"type":"function","function":{"name":"Agent","parameters":{"type":"object"}}}]}"#,
    },
    Api {
        name: "Messages",
        path: "/v1/messages",
        request: r#"{"model":"m","max_tokens":1024,"system":"You are the root.","messages":[{"role":"user","content":"Check the logs"}],"tools":[{"name":"Agent","input_schema":{"type":"object"}}]}"#,
    },
    Api {
        name: "Responses",
        path: "/v1/responses",
        request: r#"{"model":"m","instructions":"You are the root.","input":"Check the logs","tools":[{"type":"function","name":"Agent","parameters":{"type":"object"}}]}"#,
    },
];

/// Sends `n` requests of `api` over one keep-alive connection: the wall time per request and
/// the last answer's body.
async fn drive(addr: std::net::SocketAddr, api: &Api, n: usize) -> (Duration, String) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let request = format!(
        "POST {} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nx-api-key: k\r\nanthropic-version: 2023-06-01\r\ncontent-length: {}\r\n\r\n{}",
        api.path,
        api.request.len(),
        api.request
    );
    let start = Instant::now();
    let mut line = String::new();
    let mut body = Vec::new();
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
        body = vec![0; length];
        read.read_exact(&mut body).await.expect("body");
        assert!(body.starts_with(b"{\"id\""), "{}", String::from_utf8_lossy(&body));
    }
    (start.elapsed() / n as u32, String::from_utf8(body).expect("UTF-8"))
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
        let scenario = rehearsal::scenario::parse(std::path::Path::new("wire-bench.json"), SCENARIO).expect("scenario");
        let options = ServeOptions { time_scale: 0.0, created_s: Some(0), ..ServeOptions::default() };
        let dialect = Dialect::builtin("roku").expect("dialect");
        // What `serve` answers each API's request with: the bare server sends those bytes.
        let probe = Server::start(&scenario, dialect.clone(), options.clone()).await.expect("start");
        let mut app = Router::new();
        for api in &APIS {
            let (_, answer) = drive(probe.addr(), api, 1).await;
            let answer = Arc::new(answer);
            app = app.route(
                api.path,
                post(move |_body: axum::body::Bytes| {
                    let answer = answer.clone();
                    async move { ([("content-type", "application/json")], (*answer).clone()) }
                }),
            );
        }
        probe.finish(End::Caller).await;
        let bare = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let bare_addr = bare.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(bare, app).await.expect("serve") });
        let mut served: Vec<Vec<Duration>> = APIS.iter().map(|_| Vec::new()).collect();
        let mut bare_times = served.clone();
        for round in 1..=rounds {
            for (i, api) in APIS.iter().enumerate() {
                // A fresh server a round and API, so each measure's record starts empty.
                let server = Server::start(&scenario, dialect.clone(), options.clone()).await.expect("start");
                let (s, _) = drive(server.addr(), api, n).await;
                let (b, _) = drive(bare_addr, api, n).await;
                let run = server.finish(End::Caller).await;
                assert_eq!(run.side.exchanges.len(), n, "every request recorded");
                println!(
                    "round {round}: {:<16} serve {:.1} µs/request, bare axum {:.1} µs/request ({n} requests each)",
                    api.name,
                    s.as_secs_f64() * 1e6,
                    b.as_secs_f64() * 1e6
                );
                served[i].push(s);
                bare_times[i].push(b);
            }
        }
        for (i, api) in APIS.iter().enumerate() {
            let (s, b) = (median(served[i].clone()), median(bare_times[i].clone()));
            println!(
                "median of {rounds}, {}: serve {:.1} µs/request, bare axum {:.1} µs/request: serve costs {:.1} µs more a request ({:.2}x)",
                api.name,
                s.as_secs_f64() * 1e6,
                b.as_secs_f64() * 1e6,
                (s.as_secs_f64() - b.as_secs_f64()) * 1e6,
                s.as_secs_f64() / b.as_secs_f64()
            );
        }
    });
}
