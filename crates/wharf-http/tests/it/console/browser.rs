//! The console in a real browser: headless Chromium driven over WebDriver (Debian's
//! `chromium` and `chromium-driver`), through a small WebDriver client written here on reqwest
//! (the protocol is a handful of JSON calls; a client crate would bring another HTTP stack).
//!
//! Runs when a chromedriver is found (`WHARF_CHROMEDRIVER`, else `chromedriver` on PATH, else
//! `/usr/bin/chromedriver`). Without one it prints one line saying how to run it, unless
//! `WHARF_BROWSER_TESTS=required` (as `.ci/run` sets after installing the packages), where a
//! missing browser fails the test. Screenshots go to the test's temp dir, or to
//! `WHARF_SCREENSHOT_DIR` when set (how `docs/console.png` is made).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wharf_testkit::TestDb;

use super::*;

/// How long the browser may take to show what a step waits for.
const STEP_MS_MAX: u64 = 10_000;

fn find_program(env: &str, name: &str, fallback: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env) {
        return Some(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| Some(PathBuf::from(fallback)).filter(|p| p.is_file()))
}

/// chromedriver on a free loopback port, killed when dropped.
struct Driver {
    child: tokio::process::Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

async fn start_driver(program: &Path) -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = tokio::process::Command::new(program)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    loop {
        let ready = client()
            .get(format!("{url}/status"))
            .send()
            .await
            .ok()
            .map(|r| r.json::<Value>());
        if let Some(body) = ready
            && body.await.is_ok_and(|b| b["value"]["ready"] == true)
        {
            return Driver { child, url };
        }
        assert!(
            started.elapsed() < Duration::from_millis(STEP_MS_MAX),
            "chromedriver did not get ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One WebDriver session.
struct Browser {
    session: String,
    http: reqwest::Client,
    shots: PathBuf,
}

/// The W3C WebDriver key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Browser {
    async fn open(driver: &Driver, chromium: &Path, profile: &Path, shots: PathBuf) -> Browser {
        let http = client();
        let args = [
            "--headless=new".to_owned(),
            // Root (CI) cannot use Chromium's sandbox; the pages are the test's own.
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--window-size=1360,1000".to_owned(),
            format!("--user-data-dir={}", profile.display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args}}}});
        let answer: Value = http
            .post(format!("{}/session", driver.url))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {answer}"))
            .to_owned();
        Browser {
            session: format!("{}/session/{session}", driver.url),
            http,
            shots,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request.send().await.unwrap().json().await.unwrap();
        if answer["value"].get("error").is_some() {
            panic!("WebDriver {path}: {}", answer["value"]);
        }
        answer["value"].clone()
    }

    async fn go(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    async fn find(&self, css: &str) -> String {
        let started = Instant::now();
        loop {
            let answer: Value = self
                .http
                .post(format!("{}/element", self.session))
                .json(&json!({"using": "css selector", "value": css}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if let Some(id) = answer["value"][ELEMENT].as_str() {
                return id.to_owned();
            }
            assert!(
                started.elapsed() < Duration::from_millis(STEP_MS_MAX),
                "no element {css} on {}: {answer}\n{}",
                self.url().await,
                self.call(reqwest::Method::GET, "/source", None).await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn click(&self, css: &str) {
        let id = self.find(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
    }

    async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// The element's text. A page that navigates between finding the element and
    /// reading it leaves a stale reference; the element is then found again on the
    /// new page rather than failing the step.
    async fn text(&self, css: &str) -> String {
        let started = Instant::now();
        loop {
            let id = self.find(css).await;
            let answer: Value = self
                .http
                .get(format!("{}/element/{id}/text", self.session))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let value = &answer["value"];
            match value.get("error").and_then(Value::as_str) {
                None => return value.as_str().unwrap_or_default().to_owned(),
                Some("stale element reference")
                    if started.elapsed() < Duration::from_millis(STEP_MS_MAX) =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Some(_) => panic!("WebDriver /element/{id}/text: {value}"),
            }
        }
    }

    async fn url(&self) -> String {
        self.call(reqwest::Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits until the page's `<h1>` says `title`.
    async fn wait_title(&self, title: &str) {
        let started = Instant::now();
        loop {
            let h1 = self.text("h1").await;
            if h1 == title {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_millis(STEP_MS_MAX),
                "page {} shows {h1:?}, not {title:?}",
                self.url().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn screenshot(&self, name: &str) -> PathBuf {
        use base64::Engine as _;
        let png = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "a PNG");
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    async fn close(self) {
        let _ = self.http.delete(&self.session).send().await;
    }
}

#[tokio::test]
async fn an_operator_signs_in_follows_every_page_and_admits_a_proposal_in_chromium() {
    let required = std::env::var("WHARF_BROWSER_TESTS").is_ok_and(|v| v == "required");
    let driver = find_program(
        "WHARF_CHROMEDRIVER",
        "chromedriver",
        "/usr/bin/chromedriver",
    );
    let chromium = find_program("WHARF_CHROMIUM", "chromium", "/usr/bin/chromium");
    let (Some(driver), Some(chromium)) = (driver, chromium) else {
        assert!(
            !required,
            "WHARF_BROWSER_TESTS=required but chromium/chromedriver are missing"
        );
        eprintln!(
            "console browser test skipped: no chromium/chromedriver (apt-get install chromium chromium-driver, or run .ci/run)"
        );
        return;
    };

    let db = TestDb::new().await;
    let base = start(&db).await;
    seed_inbox(&db).await;
    enqueue(&base, "welcome:ada", "email:ada", false, Some("acct-ada")).await;
    let proposal = enqueue(&base, "proposal:bob", "email:bob", true, None).await;
    let uncertain = enqueue(&base, "uncertain:cy", "email:cy", false, None).await;
    end_uncertain(&db, uncertain).await;

    let temp = tempfile::tempdir().unwrap();
    let shots = match std::env::var_os("WHARF_SCREENSHOT_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => temp.path().join("screenshots"),
    };
    std::fs::create_dir_all(&shots).unwrap();
    let driver = start_driver(&driver).await;
    let browser = Browser::open(&driver, &chromium, &temp.path().join("profile"), shots).await;

    // Not signed in: the console sends the browser to sign-in.
    browser.go(&format!("{base}/console")).await;
    browser.wait_title("Sign in").await;
    browser.type_into("#operator", "ada").await;
    browser.type_into("#token", OPERATOR_TOKEN).await;
    browser.screenshot("00-sign-in").await;
    browser.click("#sign-in").await;
    browser.wait_title("Overview").await;
    // The script ran (the page allows only its own): it marks live pages.
    assert!(browser.text(".live-stamp").await.starts_with("live:"));
    assert!(
        browser
            .text("main")
            .await
            .contains("LEASE_LOST_AFTER_WRITE")
    );
    browser.screenshot("01-overview").await;

    // Every page, by its navigation link.
    for (href, title, shows) in [
        ("/console/actions", "Actions", "proposal:bob"),
        ("/console/lanes", "Lanes", "email:bob"),
        ("/console/in-doubt", "In doubt", "uncertain:cy"),
        (
            "/console/dead-letters",
            "Dead letters",
            "explicit tenant and project",
        ),
        ("/console/inbox", "Inbox", "acme"),
        ("/console/audit", "Operator audit", "sign-in"),
    ] {
        browser.click(&format!("nav a[href=\"{href}\"]")).await;
        browser.wait_title(title).await;
        assert!(browser.text("main").await.contains(shows), "{title}");
        browser
            .screenshot(&title.to_lowercase().replace(' ', "-"))
            .await;
    }
    browser.go(&format!("{base}/console/inbox/acme/p1")).await;
    browser.wait_title("acme / p1").await;
    assert!(browser.text("main").await.contains("3–4"));
    browser.screenshot("inbox-project").await;

    // One operator action end to end: admit the proposal, through its confirmation.
    browser
        .go(&format!("{base}/console/actions/{proposal}"))
        .await;
    browser.wait_title(&format!("Action {proposal}")).await;
    browser.click("#admit").await;
    browser.wait_title("Admit a proposal").await;
    browser.screenshot("confirm-admit").await;
    browser.click("#confirm").await;
    browser.wait_title(&format!("Action {proposal}")).await;
    assert_eq!(browser.text("#notice").await, "The proposal was admitted.");
    browser.screenshot("admitted").await;
    let state: String = sqlx::query_scalar("SELECT state FROM wharf.action WHERE id = $1")
        .bind(proposal)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(state, "ADMITTED");
    let audited: (String, String) = sqlx::query_as(
        "SELECT actor, operation FROM wharf.operator_audit WHERE role IS NOT NULL ORDER BY audit_id DESC LIMIT 1",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(audited, ("ada".into(), "action-admit".into()));

    // Sign out from the header; the console is closed again.
    browser.click("header button").await;
    browser.wait_title("Sign in").await;
    browser.go(&format!("{base}/console/actions")).await;
    browser.wait_title("Sign in").await;
    browser.close().await;
    drop(driver);
}
