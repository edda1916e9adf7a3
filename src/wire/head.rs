//! The head of a connection's first request, read and checked before hyper sees it, so that a
//! request hyper would refuse with a bare status and an empty body (a garbage request line,
//! headers past the limit) gets the API's error object and a finding instead.
//!
//! hyper answers a head it cannot parse itself (`400`, or `431` for headers too large) and
//! offers no hook for the body; reading the first head here is the one place the server can
//! speak first. A later request on a kept-alive connection is hyper's to parse: one that
//! fails still ends the connection, and the server records a finding for it from hyper's
//! error (see `server::serve_conn`).
//!
//! What this module deliberately does not do: parse the body, route, or judge anything; it
//! hands the bytes it read to hyper unchanged ([`Prefixed`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// The largest request head (request line and headers) the server reads: 64 KiB, far above
/// what an SDK sends (under 2 KiB).
pub(crate) const HEAD_BYTES_MAX: usize = 64 << 10;

/// The most headers one request may carry (hyper's own default).
pub(crate) const HEADERS_MAX: usize = 100;

/// Why a head was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BadHead {
    /// Not an HTTP/1 request head: the parser's reason.
    Malformed(String),
    /// Longer than [`HEAD_BYTES_MAX`], or more than [`HEADERS_MAX`] headers.
    TooLarge(String),
}

impl BadHead {
    /// The HTTP status it is answered with.
    pub(crate) fn status(&self) -> u16 {
        match self {
            BadHead::Malformed(_) => 400,
            BadHead::TooLarge(_) => 431,
        }
    }

    /// What is wrong, in a sentence.
    pub(crate) fn why(&self) -> &str {
        match self {
            BadHead::Malformed(why) | BadHead::TooLarge(why) => why,
        }
    }
}

/// What reading the first head gave.
pub(crate) enum FirstHead {
    /// A well-formed head (and whatever followed it): hand `Prefixed` to hyper.
    Ok(Prefixed),
    /// A head hyper would refuse: answer it with [`refuse`].
    Bad(TcpStream, BadHead),
    /// The client closed (or the socket failed) before a whole head came: nothing to answer.
    Closed,
}

/// Reads `stream` until its first request head is complete, refused, or the client goes.
pub(crate) async fn first_head(mut stream: TcpStream) -> FirstHead {
    let mut read = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return FirstHead::Closed,
            Ok(n) => n,
        };
        read.extend_from_slice(&chunk[..n]);
        match check(&read) {
            Ok(true) => return FirstHead::Ok(Prefixed { prefix: read, at: 0, inner: stream }),
            Ok(false) if read.len() > HEAD_BYTES_MAX => {
                let why = format!("the request head is longer than {HEAD_BYTES_MAX} bytes");
                return FirstHead::Bad(stream, BadHead::TooLarge(why));
            }
            Ok(false) => {}
            Err(bad) => return FirstHead::Bad(stream, bad),
        }
    }
}

/// `Ok(true)`: a complete, well-formed head; `Ok(false)`: well-formed so far.
fn check(bytes: &[u8]) -> Result<bool, BadHead> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(bytes) {
        Ok(httparse::Status::Complete(len)) if len > HEAD_BYTES_MAX => {
            Err(BadHead::TooLarge(format!("the request head is {len} bytes, longer than {HEAD_BYTES_MAX}")))
        }
        Ok(httparse::Status::Complete(_)) => Ok(true),
        Ok(httparse::Status::Partial) => Ok(false),
        Err(httparse::Error::TooManyHeaders) => {
            Err(BadHead::TooLarge(format!("the request has more than {HEADERS_MAX} headers")))
        }
        Err(e) => {
            let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
            let line = String::from_utf8_lossy(line);
            Err(BadHead::Malformed(format!(
                "not an HTTP/1 request head ({e}); its first line is {}",
                crate::trace::quoted(&super::excerpt(line.trim_end()))
            )))
        }
    }
}

/// Answers a refused head with `body` (the API's error object, JSON) and closes.
pub(crate) async fn refuse(mut stream: TcpStream, status: u16, reason: &str, body: &str) {
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let answer = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    // A client that does not read its refusal is not waited for.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), answer).await;
}

/// A connection whose first bytes were already read: they are read again first.
pub(crate) struct Prefixed {
    prefix: Vec<u8>,
    at: usize,
    inner: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.at < self.prefix.len() {
            let n = (self.prefix.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.prefix[at..at + n]);
            self.at += n;
            if self.at == self.prefix.len() {
                self.prefix = Vec::new();
                self.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_line_of_garbage_is_malformed_and_quoted_short() {
        let bad = check(b"\x01\x02 garbage here\r\n\r\n").unwrap_err();
        assert_eq!(bad.status(), 400);
        assert!(bad.why().contains("not an HTTP/1 request head"), "{}", bad.why());
    }

    #[test]
    fn heads_are_complete_partial_or_too_many() {
        assert_eq!(check(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n\r\n"), Ok(true));
        assert_eq!(check(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"), Ok(false));
        let many: String = (0..=HEADERS_MAX).map(|i| format!("x-h{i}: v\r\n")).collect();
        let head = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(check(head.as_bytes()).unwrap_err().status(), 431);
    }
}
