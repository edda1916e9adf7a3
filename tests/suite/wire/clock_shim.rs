//! The Rust clock endpoint with the real Python shim and httpx (issue 24): a runtime's
//! timeouts and replies land on exact virtual instants, and 20 runs give the same transcript.
//!
//! It needs a Python >= 3.11 with httpx, so plain `cargo test` skips it (ignored);
//! `shims/python/run_tests.sh --with-httpx` makes that Python and runs it with
//! `REHEARSAL_CLOCK_PYTHON` set. The HTTP side is a stand-in for `rehearsal serve`, calling the
//! clock at the hook points docs/clock-protocol.md names for it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rehearsal::wire::clock::{ClockEnd, ClockEndpoint, ClockOptions, ClockReport};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// One run: the transcript, the runtime's output, the closes' virtual times, the wall time.
async fn run(python: &str) -> (ClockReport, String, Vec<u64>, Duration) {
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap().to_string();
    let endpoint =
        ClockEndpoint::bind(ClockOptions { http: vec![http_addr.clone()], ..ClockOptions::default() }).await.unwrap();
    let clock = endpoint.clock();
    let closes = Arc::new(Mutex::new(Vec::new()));
    let (c2, closes2) = (clock.clone(), closes.clone());
    tokio::spawn(async move {
        loop {
            let (stream, peer) = http.accept().await.unwrap();
            let peer = peer.to_string();
            let clock = c2.clone();
            let closes = closes2.clone();
            clock.conn_opened(&peer);
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut reader = BufReader::new(read);
                'conn: loop {
                    let mut latency = 0u64;
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                            break 'conn;
                        }
                        let l = line.trim().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("x-latency-ms:") {
                            latency = v.trim().parse().unwrap();
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).await.unwrap();
                    let release = clock.release_after(&peer, latency * 1_000_000);
                    let mut probe = [0u8; 1];
                    tokio::select! {
                        released = release => {
                            if released.is_err() { break 'conn; }
                            write.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await.unwrap();
                        }
                        _ = reader.read(&mut probe) => { break 'conn; }
                    }
                }
                if let Ok(at) = clock.conn_closed(&peer).await {
                    closes.lock().unwrap().push(at);
                }
            });
        }
    });
    let code = r#"
import asyncio, json, os, httpx
async def main():
    loop = asyncio.get_running_loop()
    out = []
    async with httpx.AsyncClient(base_url="http://" + os.environ["MODEL"], timeout=10) as client:
        for latency in ["9999", "30000", "10000", "500"]:
            start = loop.time()
            try:
                r = await client.post("/v1/chat/completions", json={"model": "m"}, headers={"X-Latency-Ms": latency})
                out.append([latency, r.text, round(loop.time() - start, 9)])
            except httpx.TimeoutException as e:
                out.append([latency, type(e).__name__, round(loop.time() - start, 9)])
    print(json.dumps(out))
asyncio.run(main())
"#;
    let started = Instant::now();
    let (clock_env, model, python) = (endpoint.env_value(), http_addr.clone(), python.to_string());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .args(["-c", code])
            .env("PYTHONPATH", concat!(env!("CARGO_MANIFEST_DIR"), "/shims/python"))
            .env("REHEARSAL_CLOCK", clock_env)
            .env("MODEL", model)
            .env("PYTHONHASHSEED", "0")
            .output()
            .expect("the Python runtime starts")
    })
    .await
    .expect("the runtime's thread ends");
    let wall = started.elapsed();
    assert!(out.status.success(), "the runtime failed: {}", String::from_utf8_lossy(&out.stderr));
    let report = endpoint.finish().await;
    let closes = closes.lock().unwrap().clone();
    (report, String::from_utf8(out.stdout).expect("UTF-8"), closes, wall)
}

#[tokio::test]
#[ignore = "needs a Python with httpx: shims/python/run_tests.sh --with-httpx runs it"]
async fn httpx_under_the_shim_gives_up_at_exact_virtual_instants_in_20_runs_of_20() {
    let python = std::env::var("REHEARSAL_CLOCK_PYTHON").expect(
        "REHEARSAL_CLOCK_PYTHON names a Python >= 3.11 with httpx (shims/python/run_tests.sh --with-httpx sets it)",
    );
    let (first, stdout, closes, wall) = run(&python).await;
    assert_eq!(
        stdout.trim(),
        r#"[["9999", "ok", 9.999], ["30000", "ReadTimeout", 10.0], ["10000", "ReadTimeout", 10.0], ["500", "ok", 0.5]]"#
    );
    assert_eq!(closes, [19_999_000_000, 29_999_000_000, 30_499_000_000], "the give-ups, at virtual times");
    assert_eq!(first.end, ClockEnd::Finished { at_ns: 30_499_000_000 });
    let mut walls = vec![wall];
    for _ in 1..20 {
        let (report, again, closes_again, wall) = run(&python).await;
        assert_eq!(report, first);
        assert_eq!(again, stdout);
        assert_eq!(closes_again, closes);
        walls.push(wall);
    }
    walls.sort();
    eprintln!("wall time of a run (Python start-up included): median {:?}, max {:?}", walls[10], walls[19]);
}
