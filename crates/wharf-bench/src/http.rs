//! A minimal HTTP/1.1 client for `bench inbox`: one keep-alive connection, one request at a
//! time, `Content-Length` bodies only — what axum answers with — and nothing else.
//!
//! Why not reqwest: wharf-cli does not depend on it outside tests, and a benchmark client
//! should cost as little CPU as possible on a 2-core machine where the server shares the cores.
//! Bounded: at most [`HEADERS_MAX`] header lines and [`BODY_BYTES_MAX`] of body per response.

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Header lines a response may have.
pub(crate) const HEADERS_MAX: usize = 100;
/// Bytes a response body may have.
pub(crate) const BODY_BYTES_MAX: usize = 64 * 1024 * 1024;

/// `host:port` out of `http://host:port[/]`.
pub(crate) fn authority(url: &str) -> anyhow::Result<String> {
    let rest = url
        .strip_prefix("http://")
        .context("--url must start with http:// (the benchmark speaks plain HTTP/1.1)")?;
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains('/') {
        bail!("--url must be http://host:port, without a path");
    }
    Ok(authority.to_owned())
}

/// One keep-alive connection.
pub(crate) struct Client {
    stream: BufReader<TcpStream>,
    host: String,
}

impl Client {
    /// Connects to `host:port`.
    pub(crate) async fn connect(authority: &str) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(authority)
            .await
            .with_context(|| format!("cannot connect to {authority}"))?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream: BufReader::new(stream),
            host: authority.to_owned(),
        })
    }

    /// Sends one request and reads its answer: status and body.
    pub(crate) async fn request(
        &mut self,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        body: &[u8],
    ) -> anyhow::Result<(u16, Vec<u8>)> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-length: {}\r\n",
            self.host,
            body.len()
        );
        if !body.is_empty() {
            head.push_str("content-type: application/json\r\n");
        }
        if let Some(token) = bearer {
            head.push_str("authorization: Bearer ");
            head.push_str(token);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let stream = self.stream.get_mut();
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        stream.flush().await?;

        let mut line = String::new();
        self.stream.read_line(&mut line).await?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("not an HTTP status line: {line:?}"))?;
        let mut length = None;
        for _ in 0..=HEADERS_MAX {
            line.clear();
            if self.stream.read_line(&mut line).await? == 0 {
                bail!("the server closed the connection mid-response");
            }
            let header = line.trim_end();
            if header.is_empty() {
                let length: usize =
                    length.context("the response has no content-length (chunked is not spoken)")?;
                if length > BODY_BYTES_MAX {
                    bail!("response body of {length} bytes is over {BODY_BYTES_MAX}");
                }
                let mut body = vec![0; length];
                self.stream.read_exact(&mut body).await?;
                return Ok((status, body));
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = Some(value.trim().parse()?);
            }
        }
        bail!("more than {HEADERS_MAX} header lines")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        let check = |url: &str, expected: Option<&str>| {
            assert_eq!(authority(url).ok().as_deref(), expected, "{url}");
        };
        check("http://127.0.0.1:8080", Some("127.0.0.1:8080"));
        check("http://localhost:8080/", Some("localhost:8080"));
        check("https://example.org", None);
        check("http://example.org/v1", None);
        check("http://", None);
    }
}
