//! Runs one Rust lock library, unchanged, against the Redis or fencer
//! addresses in LOCK_ADDRS (host:port, comma-separated), and checks what the
//! library itself answers. The same scenarios as integration/pylibs/driver.py:
//!
//!     fencer-rustlibs LIBRARY basic   the library's API and mutual exclusion
//!     fencer-rustlibs LIBRARY hold    a lock held across a leader kill
//!
//! basic: A takes the lock; B is refused while A holds it; A extends it and
//! still owns it; A releases it; B then gets it and releases it. Then
//! WORKERS workers, each with its own client, take the lock ROUNDS times
//! each, and no two are ever inside at once.
//!
//! hold: A takes the lock (a 30 s lease) and B tries every 200 ms (errors
//! while the cluster elects a new leader are counted and tried again). The
//! driver prints "held" and waits for "killed" on stdin (the test kills the
//! leader meanwhile). Then A still owns the lock and extends it, B has not
//! got it and still does not 1 s later; A releases it and B gets it within
//! 10 s.
//!
//! Each step that behaved prints "ok: ..."; the last line is PASS. Any other
//! outcome panics (exit status 101).
//!
//! Libraries: `rslock` (a Redlock: given every address), and `redis-rs`, the
//! plain lock of Redis's distributed-lock page written with redis-rs: `SET
//! key value NX PX ttl`, released by compare-and-delete and extended by
//! compare-and-pexpire, both sent as redis-rs sends scripts (EVALSHA; on
//! NOSCRIPT, SCRIPT LOAD and EVALSHA again). It is given the first address.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncBufReadExt;

const WORKERS: usize = 3;
const ROUNDS: usize = 4;

const RELEASE: &str = r#"if redis.call("get",KEYS[1]) == ARGV[1] then
    return redis.call("del",KEYS[1])
else
    return 0
end"#;

const EXTEND: &str = r#"if redis.call("get",KEYS[1]) == ARGV[1] then
    return redis.call("pexpire",KEYS[1],ARGV[2])
else
    return 0
end"#;

/// addrs are LOCK_ADDRS as redis-rs URLs; LOCK_PROTOCOL=3 makes the
/// connections speak RESP3 (HELLO 3).
fn addrs() -> Vec<String> {
    let query = match std::env::var("LOCK_PROTOCOL").as_deref() {
        Ok("3") => "?protocol=resp3",
        _ => "",
    };
    std::env::var("LOCK_ADDRS")
        .expect("LOCK_ADDRS is not set")
        .split(',')
        .map(|a| format!("redis://{a}/{query}"))
        .collect()
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// unique returns a value no other holder uses.
fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{}-{}-{}",
        std::process::id(),
        nanos,
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Holder is one holder: a library instance with its own connection(s).
enum Holder {
    Rslock {
        manager: rslock::LockManager,
        lock: Option<rslock::Lock>,
    },
    Plain {
        con: redis::aio::MultiplexedConnection,
        value: String,
    },
}

impl Holder {
    async fn new(lib: &str) -> Holder {
        match lib {
            "rslock" => Holder::Rslock {
                manager: rslock::LockManager::new(addrs()),
                lock: None,
            },
            "redis-rs" => {
                let client =
                    redis::Client::open(addrs()[0].as_str()).expect("redis-rs: the address");
                // The response timeout outlasts an election: a follower
                // holds a command until a new leader answers it.
                let cfg = redis::AsyncConnectionConfig::new()
                    .set_response_timeout(Some(Duration::from_secs(15)));
                let con = client
                    .get_multiplexed_async_connection_with_config(&cfg)
                    .await
                    .expect("redis-rs: connecting");
                Holder::Plain {
                    con,
                    value: String::new(),
                }
            }
            _ => panic!("unknown library {lib}"),
        }
    }

    /// try_acquire takes the lock without waiting for a holder to let go
    /// (rslock tries its default three times).
    async fn try_acquire(&mut self, key: &str, ttl: Duration) -> Result<bool, String> {
        match self {
            Holder::Rslock { manager, lock } => match manager.lock(key.as_bytes(), ttl).await {
                Ok(l) => {
                    *lock = Some(l);
                    Ok(true)
                }
                Err(rslock::LockError::Unavailable) => Ok(false),
                Err(e) => Err(e.to_string()),
            },
            Holder::Plain { con, value } => {
                *value = unique();
                let r: Option<String> = redis::cmd("SET")
                    .arg(key)
                    .arg(value.as_str())
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl.as_millis() as u64)
                    .query_async(con)
                    .await
                    .map_err(|e| e.to_string())?;
                match r.as_deref() {
                    Some("OK") => Ok(true),
                    None => Ok(false),
                    Some(other) => Err(format!("SET NX PX answered {other:?}")),
                }
            }
        }
    }

    /// acquire waits up to timeout for the lock.
    async fn acquire(&mut self, key: &str, ttl: Duration, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(true) = self.try_acquire(key, ttl).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    async fn extend(&mut self, key: &str, ttl: Duration) -> bool {
        match self {
            Holder::Rslock { manager, lock } => {
                let l = lock.as_ref().expect("extend without a lock");
                match manager.extend(l, ttl).await {
                    Ok(l) => {
                        *lock = Some(l);
                        true
                    }
                    Err(e) => panic!("rslock: extend: {e}"),
                }
            }
            Holder::Plain { con, value } => {
                let n: i64 = redis::Script::new(EXTEND)
                    .key(key)
                    .arg(value.as_str())
                    .arg(ttl.as_millis() as u64)
                    .invoke_async(con)
                    .await
                    .expect("redis-rs: extend");
                n == 1
            }
        }
    }

    async fn owned(&mut self, key: &str) -> bool {
        match self {
            Holder::Rslock { manager, lock } => {
                // is_freed answers Ok(false) while the key holds this lock's
                // value, and an error naming the mismatch otherwise.
                matches!(
                    manager
                        .is_freed(lock.as_ref().expect("owned without a lock"))
                        .await,
                    Ok(false)
                )
            }
            Holder::Plain { con, value } => {
                let v: Option<String> = redis::cmd("GET")
                    .arg(key)
                    .query_async(con)
                    .await
                    .expect("redis-rs: GET");
                v.as_deref() == Some(value.as_str())
            }
        }
    }

    async fn release(&mut self, key: &str) {
        match self {
            Holder::Rslock { manager, lock } => {
                manager
                    .unlock(lock.as_ref().expect("release without a lock"))
                    .await;
            }
            Holder::Plain { con, value } => {
                let n: i64 = redis::Script::new(RELEASE)
                    .key(key)
                    .arg(value.as_str())
                    .invoke_async(con)
                    .await
                    .expect("redis-rs: release");
                assert_eq!(n, 1, "redis-rs: the release deleted {n} keys, want 1");
            }
        }
    }
}

fn ok(step: &str) {
    println!("ok: {step}");
}

async fn basic(lib: &str, key: &str) {
    let (mut a, mut b) = (Holder::new(lib).await, Holder::new(lib).await);
    let ttl = Duration::from_secs(10);
    assert_eq!(
        a.try_acquire(key, ttl).await,
        Ok(true),
        "A's acquire of a free lock"
    );
    ok("A acquired");
    assert_eq!(
        b.try_acquire(key, ttl).await,
        Ok(false),
        "B's acquire while A holds the lock"
    );
    ok("B refused while A holds it");
    assert!(a.extend(key, Duration::from_secs(20)).await, "A's extend");
    assert!(
        a.owned(key).await,
        "A does not own its lock after the extend"
    );
    ok("A extended and owns it");
    a.release(key).await;
    ok("A released");
    assert!(
        !a.owned(key).await,
        "A still owns the lock after its release"
    );
    assert_eq!(
        b.try_acquire(key, ttl).await,
        Ok(true),
        "B's acquire after A's release"
    );
    ok("B acquired after A's release");
    b.release(key).await;
    ok("B released");

    let inside = Arc::new(AtomicUsize::new(0));
    let sections = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..WORKERS {
        let (inside, sections, lib, key) = (
            inside.clone(),
            sections.clone(),
            lib.to_string(),
            key.to_string(),
        );
        tasks.push(tokio::spawn(async move {
            let mut h = Holder::new(&lib).await;
            for _ in 0..ROUNDS {
                assert!(
                    h.acquire(&key, ttl, Duration::from_secs(30)).await,
                    "worker {i} waited 30 s for the lock"
                );
                let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                assert_eq!(n, 1, "worker {i} entered while another worker was inside");
                sections.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                h.release(&key).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("a worker failed");
    }
    assert_eq!(sections.load(Ordering::SeqCst), WORKERS * ROUNDS);
    ok(&format!(
        "{WORKERS} workers x {ROUNDS} rounds, never two inside"
    ));
}

async fn hold(lib: &str, key: &str) {
    let mut a = Holder::new(lib).await;
    assert_eq!(
        a.try_acquire(key, Duration::from_secs(30)).await,
        Ok(true),
        "A's acquire of a free lock"
    );
    let got = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let waiter = {
        let (got, stop, errors, lib, key) = (
            got.clone(),
            stop.clone(),
            errors.clone(),
            lib.to_string(),
            key.to_string(),
        );
        tokio::spawn(async move {
            let mut b = Holder::new(&lib).await;
            while !stop.load(Ordering::SeqCst) {
                match b.try_acquire(&key, Duration::from_secs(10)).await {
                    Ok(true) => {
                        got.store(true, Ordering::SeqCst);
                        b.release(&key).await;
                        return;
                    }
                    Ok(false) => {}
                    Err(e) => errors.lock().unwrap().push(e),
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    println!("held");
    let mut line = String::new();
    tokio::io::BufReader::new(tokio::io::stdin())
        .read_line(&mut line)
        .await
        .expect("reading stdin");
    assert_eq!(line.trim(), "killed", "stdin");
    assert!(
        !got.load(Ordering::SeqCst),
        "B got the lock A holds, across the leader kill"
    );
    assert!(
        a.owned(key).await,
        "A does not own its lock after the leader kill"
    );
    assert!(
        a.extend(key, Duration::from_secs(30)).await,
        "A's extend after the leader kill"
    );
    ok("A still owns its lock after the kill and extended it");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !got.load(Ordering::SeqCst),
        "B got the lock A holds, after the leader kill"
    );
    {
        let errs = errors.lock().unwrap();
        ok(&format!(
            "B still refused ({} errors during the election: {:?})",
            errs.len(),
            errs.iter().take(3).collect::<Vec<_>>()
        ));
    }
    a.release(key).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !got.load(Ordering::SeqCst) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::SeqCst);
    assert!(
        got.load(Ordering::SeqCst),
        "B did not get the lock within 10 s of A's release"
    );
    waiter.await.expect("the waiter failed");
    ok("B acquired after A's release");
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert_eq!(args.len(), 3, "usage: fencer-rustlibs LIBRARY basic|hold");
    let key = format!(
        "{}:{}",
        std::env::var("LOCK_KEY").unwrap_or_else(|_| "rustlibs".into()),
        unique()
    );
    match args[2].as_str() {
        "basic" => basic(&args[1], &key).await,
        "hold" => hold(&args[1], &key).await,
        m => panic!("unknown mode {m}"),
    }
    println!("PASS");
}
