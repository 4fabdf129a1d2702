//! An in-process OpenAI-compatible server for tests (feature `test-server`): answers chat completions
//! from a script of responses, records every request, and measures how many were in flight at once.
//!
//! It speaks just enough HTTP/1.1 for a client: one request per connection, `Content-Length` bodies,
//! `Connection: close`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(String, String)>,
}

impl Reply {
    /// A chat completion whose message content is `text`, with token usage.
    pub fn completion(text: &str) -> Self {
        let body = serde_json::json!({
            "id": "test",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103}
        });
        Self { status: 200, body: body.to_string(), headers: Vec::new() }
    }

    pub fn status(status: u16, body: &str) -> Self {
        Self { status, body: body.into(), headers: Vec::new() }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == &name.to_ascii_lowercase()).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

type Responder = dyn Fn(&Recorded) -> Reply + Send + Sync;

struct State {
    script: Mutex<VecDeque<Reply>>,
    fallback: Box<Responder>,
    recorded: Mutex<Vec<Recorded>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    delay: Duration,
    stop: AtomicBool,
}

/// The server; stops when dropped.
pub struct TestServer {
    address: SocketAddr,
    state: Arc<State>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer").field("address", &self.address).finish_non_exhaustive()
    }
}

impl TestServer {
    /// Starts a server that answers with `script` in order, then with `fallback` for every later request,
    /// each after `delay`.
    pub fn start(
        script: Vec<Reply>,
        delay: Duration,
        fallback: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?;
        let state = Arc::new(State {
            script: Mutex::new(script.into()),
            fallback: Box::new(fallback),
            recorded: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            delay,
            stop: AtomicBool::new(false),
        });
        let accept_state = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if accept_state.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let state = Arc::clone(&accept_state);
                std::thread::spawn(move || handle(stream, &state));
            }
        });
        Ok(Self { address, state })
    }

    /// The base URL to give a client (`http://127.0.0.1:PORT/v1`).
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.recorded.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The most requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.address);
    }
}

fn handle(stream: TcpStream, state: &State) {
    if state.stop.load(Ordering::SeqCst) {
        return;
    }
    let mut flight = InFlight::start(state);
    let result = serve(stream, state, &mut flight);
    drop(flight);
    if let Err(error) = result {
        tracing::debug!(%error, "test server connection failed");
    }
}

/// One request being answered, counted from its connection until its reply is about to be written: the
/// client can read the reply (and let its next request go) only after the count went down, so
/// [`TestServer::max_in_flight`] never exceeds what the client let through, however the threads are
/// scheduled.
struct InFlight<'a> {
    state: &'a State,
    counted: bool,
}

impl<'a> InFlight<'a> {
    fn start(state: &'a State) -> Self {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self { state, counted: true }
    }

    fn end(&mut self) {
        if std::mem::take(&mut self.counted) {
            self.state.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

fn serve(mut stream: TcpStream, state: &State, flight: &mut InFlight<'_>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut words = request_line.split_whitespace();
    let method = words.next().unwrap_or_default().to_owned();
    let path = words.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length =
        headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let recorded = Recorded { method, path, headers, body: String::from_utf8_lossy(&body).into_owned() };
    if let Ok(mut all) = state.recorded.lock() {
        all.push(recorded.clone());
    }
    std::thread::sleep(state.delay);
    let scripted = state.script.lock().ok().and_then(|mut script| script.pop_front());
    let reply = scripted.unwrap_or_else(|| (state.fallback)(&recorded));
    let mut head = format!(
        "HTTP/1.1 {} Test\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    flight.end();
    stream.write_all(head.as_bytes())?;
    stream.write_all(reply.body.as_bytes())?;
    stream.flush()
}
