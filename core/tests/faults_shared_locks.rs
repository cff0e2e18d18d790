//! The partition nemesis of T18 (faults_nemesis.rs) against a semaphore and
//! a read-write lock on five nodes: links blackholed or dropping replies at
//! random, nodes paused. Within each grant's reported validity there are
//! never more holders than permits, and never a writer beside anyone;
//! with everything healed, a client gets in again. Seeded, 8 s each in CI
//! (`FENCELOCK_LONG=1`: 60 s); replay with the seed printed. And a node
//! that restarts with AOF while permits and a writer are held: still held,
//! still exclusive, tokens still rising. And a permit's holder process
//! killed (`kill -9`) or stopped (`SIGSTOP`): its permit comes back at the
//! end of its lease, not before, and the stopped holder's late write is
//! refused.

mod faults_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use faults_support::*;
use fencelock::{Client, Lock, LockOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TTL: Duration = Duration::from_millis(1000);

#[test]
#[ignore = "the holder child process of other tests, not a test"]
fn child_entry() {
    faults_support::child::run_child();
}

/// What a worker takes each round.
#[derive(Clone, Copy)]
enum Kind {
    Permit(u32),
    ReadOrWrite,
}

async fn take(
    client: &Client,
    kind: Kind,
    name: &str,
    rng: &mut StdRng,
) -> (String, fencelock::Result<Lock>) {
    let options = LockOptions::new(TTL).wait(TTL * 2);
    match kind {
        Kind::Permit(permits) => (
            "holder".to_owned(),
            client.semaphore(name, permits).unwrap().acquire(options).await,
        ),
        Kind::ReadOrWrite if rng.random_bool(0.3) => (
            "writer".to_owned(),
            client.rw_lock(name).unwrap().write(options).await,
        ),
        Kind::ReadOrWrite => (
            "reader".to_owned(),
            client.rw_lock(name).unwrap().read(options).await,
        ),
    }
}

/// Runs the nemesis while 4 clients (each behind its own proxies) take
/// `kind` on `name` and hold it a few milliseconds; returns the history.
async fn under_nemesis(test: &str, kind: Kind, name: &str) -> (History, Vec<Client>) {
    let mut rng = StdRng::seed_from_u64(seed(test));
    let run_for = Duration::from_secs(scale(test, 8, 60) as u64);
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let links: Vec<Vec<FaultProxy>> = (0..4).map(|_| proxies_for(&nodes)).collect();
    let mut clients = Vec::new();
    for proxies in &links {
        clients.push(proxied_client(proxies).await);
    }
    let history = History::new();
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for (w, client) in clients.iter().enumerate() {
        let (client, history, stop, name) = (client.clone(), history.clone(), stop.clone(), name.to_owned());
        let mut rng = StdRng::seed_from_u64(rng.random());
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let requested = Instant::now();
                let (role, taken) = take(&client, kind, &name, &mut rng).await;
                let Ok(lock) = taken else { continue };
                let id = history.record(Grant::new(
                    format!("{role} {w}"),
                    name.clone(),
                    requested,
                    Instant::now(),
                    lock.remaining(),
                    TTL,
                    lock.fencing_token(),
                ));
                tokio::time::sleep(ms(rng.random_range(0..20))).await;
                history.released(id, Instant::now());
                let _ = lock.release().await;
            }
        }));
    }
    let (started, mut paused, mut steps) = (Instant::now(), None, 0);
    while started.elapsed() < run_for {
        if paused.is_some_and(|(_, until)| Instant::now() >= until) {
            resume(&nodes, &mut paused);
        }
        disturb(&mut rng, &links, &nodes, &mut paused, TTL);
        steps += 1;
        tokio::time::sleep(ms(rng.random_range(200..=800))).await;
    }
    links.iter().flatten().for_each(|p| p.set(Mode::Pass));
    resume(&nodes, &mut paused);
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    // Liveness: with everything healed, a client gets in within 2 × ttl.
    let healed = take(&clients[0], kind, name, &mut rng).await.1;
    assert!(
        healed.is_ok(),
        "nothing granted within 2 x ttl of the heal: {:?}",
        healed.err()
    );
    eprintln!("{test}: {steps} nemesis steps, {} grants", history.len());
    assert!(
        history.len() >= 10,
        "only {} grants in {run_for:?}",
        history.len()
    );
    (history, clients)
}

fn validity_violations(history: &History) -> Vec<Violation> {
    let mut all = history.check(&CheckOptions::default());
    all.retain(|v| matches!(v, Violation::Validity { .. }));
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_under_the_partition_nemesis_never_exceeds_its_permits() {
    let test = "a_semaphore_under_the_partition_nemesis_never_exceeds_its_permits";
    let (history, _clients) = under_nemesis(test, Kind::Permit(2), "nemesis-sem").await;
    let mut violations = history.capacity_violations(2);
    violations.extend(validity_violations(&history));
    assert_no_violations(&violations);
    eprintln!(
        "{test}: at most {} holders at once",
        history.max_concurrent("nemesis-sem")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_lock_under_the_partition_nemesis_keeps_writers_alone() {
    let test = "a_read_write_lock_under_the_partition_nemesis_keeps_writers_alone";
    let (history, _clients) = under_nemesis(test, Kind::ReadOrWrite, "nemesis-rw").await;
    let mut violations = history.read_write_violations(|g| g.client.starts_with("writer"));
    violations.extend(validity_violations(&history));
    assert_no_violations(&violations);
}

/// Three AOF nodes; a semaphore's only permit and a read-write lock's
/// writer are held while node 1 restarts (its keys come back from the
/// AOF): no second holder, no reader beside the writer, and the next
/// grants' tokens are larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_and_writers_survive_an_aof_restart() {
    let options = NodeOptions {
        aof: true,
        ..NodeOptions::default()
    };
    let nodes = RedisNode::start_many(3, &options);
    let client = |nodes: &[RedisNode]| {
        builder_for(nodes.iter().map(RedisNode::url))
            .node_timeout(GENEROUS_NODE_TIMEOUT)
            .build()
    };
    let (holder, other) = (client(&nodes).await.unwrap(), client(&nodes).await.unwrap());
    let long = LockOptions::new(ms(30_000));
    let permit = holder
        .semaphore("restart-sem", 1)
        .unwrap()
        .acquire(long.clone())
        .await
        .unwrap();
    let writer = holder
        .rw_lock("restart-rw")
        .unwrap()
        .write(long.clone())
        .await
        .unwrap();
    // Acquire returns at a majority; the restarting node must hold both too.
    let keys = ["fencelock:{restart-sem}:sem:0", "fencelock:{restart-rw}:rw:write"];
    let everywhere = wait_until(ms(5_000), || {
        nodes.iter().all(|n| keys.iter().all(|k| get(n, k).is_some()))
    })
    .await;
    assert!(everywhere, "the grants never reached every node");
    tokio::task::block_in_place(|| nodes[1].restart());
    assert!(
        keys.iter().all(|k| get(&nodes[1], k).is_some()),
        "the AOF lost a key"
    );
    let sem = other.semaphore("restart-sem", 1).unwrap();
    let rw = other.rw_lock("restart-rw").unwrap();
    for _ in 0..5 {
        assert!(
            sem.try_acquire(long.clone()).await.unwrap().is_none(),
            "a second holder of one permit"
        );
        assert!(
            rw.try_read(long.clone()).await.unwrap().is_none(),
            "a reader beside the writer"
        );
    }
    assert_eq!(sem.holders().await.unwrap(), 1);
    permit.release().await.unwrap();
    writer.release().await.unwrap();
    let next = sem
        .try_acquire(long.clone())
        .await
        .unwrap()
        .expect("the permit is free again");
    let reader = rw
        .try_read(long.clone())
        .await
        .unwrap()
        .expect("the lock is free again");
    assert!(next.fencing_token() > permit.fencing_token());
    assert!(reader.fencing_token() > writer.fencing_token());
}

/// T04 and T14 for a permit: the only permit of a semaphore is held by a
/// child process with a watchdog, which is killed (`kill -9`) or stopped
/// (`SIGSTOP`). A contender gets the permit no earlier than the holder's
/// validity ended and within a ttl (plus slack) of the fault, with a larger
/// token; the stopped holder, continued, has its fenced write refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_or_stopped_permit_holder_frees_its_permit_at_its_lease() {
    use faults_support::child::Holder;
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let urls: Vec<String> = nodes.iter().map(RedisNode::url).collect();
    let contender = builder_for(urls.clone()).build().await.unwrap();
    for (run, signal) in [libc::SIGKILL, libc::SIGSTOP].into_iter().enumerate() {
        let (name, data) = (format!("held-permit:{run}"), format!("data:held-permit:{run}"));
        let mut holder = Holder::spawn(&urls, &name, TTL, &[("FENCELOCK_CHILD_PERMITS", "1".to_owned())]);
        let holder_token = holder.acquire();
        assert_eq!(holder.ask(&format!("write {data} A")), "write ok held=true");
        let asked = Instant::now();
        let holder_valid_until = asked + holder.status().remaining;
        holder.signal(signal);
        let faulted = Instant::now();
        let permit = contender
            .semaphore(&name, 1)
            .unwrap()
            .acquire(LockOptions::new(TTL).wait(ms(3000)))
            .await
            .unwrap_or_else(|e| panic!("run {run}: {e}"));
        let acquired = Instant::now();
        assert!(
            acquired + ms(2) >= holder_valid_until,
            "run {run}: granted {:?} before the holder's validity ended",
            holder_valid_until - acquired
        );
        assert!(
            acquired <= faulted + TTL + ms(400),
            "run {run}: granted {:?} after the fault",
            acquired - faulted
        );
        assert!(permit.fencing_token() > holder_token);
        contender.fenced_set(&data, "B", permit.fence()).await.unwrap();
        if signal == libc::SIGSTOP {
            holder.signal(libc::SIGCONT);
            let answer = tokio::task::block_in_place(|| holder.ask(&format!("write {data} A-late")));
            assert_eq!(
                answer,
                format!("write {} held=false", fencelock::ErrorKind::StaleToken),
                "the woken holder's write"
            );
        }
        permit.release().await.unwrap();
    }
}
