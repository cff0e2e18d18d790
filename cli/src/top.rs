//! `fencelock top`: a refreshing view of the busiest locks under the prefix.
//!
//! Each frame lists the locks (`Client::resources`, or the ones named on the
//! command line), inspects each on every node, and ranks them by grants per
//! second: the rise of a lock's fencing counter since the previous frame.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyModifiers};
use crossterm::{cursor, execute, terminal};
use fencelock::{Client, NodeLockState};
use futures_util::StreamExt;

use crate::args::TopArgs;
use crate::exit;

/// How many locks a frame lists at most; the view shows the busiest `--limit`.
const LISTED: usize = 10_000;
/// How many locks a frame inspects at once.
const INSPECTED_AT_ONCE: usize = 32;

/// Runs top until q (on a terminal), a signal, or `--iterations` frames.
pub async fn top(client: &Client, args: &TopArgs) -> ExitCode {
    let interactive = args.iterations.is_none() && std::io::stdout().is_terminal();
    let mut view = View::new(client, args);
    if let Err(e) = view.frame().await {
        eprintln!("fencelock: {e}");
        return exit::for_error(e.kind());
    }
    if interactive {
        interactive_loop(&mut view, args.interval).await
    } else {
        frames_loop(&mut view, args).await
    }
}

/// Prints frames one after another, plain text, until `--iterations` or a signal.
async fn frames_loop(view: &mut View<'_>, args: &TopArgs) -> ExitCode {
    let mut printed = 0_u64;
    loop {
        print!("{}", view.render(usize::MAX, "\n"));
        let _ = std::io::stdout().flush();
        printed += 1;
        if args.iterations.is_some_and(|n| printed >= n) {
            return ExitCode::SUCCESS;
        }
        tokio::select! {
            () = tokio::time::sleep(args.interval) => {}
            () = interrupted() => return ExitCode::SUCCESS,
        }
        println!();
        let _ = view.frame().await;
    }
}

/// Redraws in the terminal's alternate screen until q, Esc, Ctrl-C or a signal.
async fn interactive_loop(view: &mut View<'_>, interval: Duration) -> ExitCode {
    let _screen = match Screen::enter() {
        Ok(screen) => screen,
        Err(e) => {
            eprintln!("fencelock: cannot take over the terminal: {e}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    loop {
        let (_, rows) = terminal::size().unwrap_or((80, 24));
        let rows = if rows == 0 { 24 } else { usize::from(rows) };
        let mut out = std::io::stdout();
        let _ = execute!(
            out,
            cursor::MoveTo(0, 0),
            terminal::Clear(terminal::ClearType::All)
        );
        // Raw mode: a new line needs its carriage return.
        let _ = write!(out, "{}", view.render(rows.saturating_sub(1), "\r\n"));
        let _ = out.flush();
        tokio::select! {
            quit = tokio::task::spawn_blocking(move || quit_pressed_within(interval)) => {
                if quit.unwrap_or(true) {
                    return ExitCode::SUCCESS;
                }
            }
            () = interrupted() => return ExitCode::SUCCESS,
        }
        let _ = view.frame().await;
    }
}

/// Waits up to `interval` for a key; true when it asks to quit.
fn quit_pressed_within(interval: Duration) -> bool {
    let until = Instant::now() + interval;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match event::poll(left) {
            Ok(true) => {}
            Ok(false) => return false,
            Err(_) => return true,
        }
        if let Ok(Event::Key(KeyEvent { code, modifiers, .. })) = event::read() {
            let ctrl_c = code == KeyCode::Char('c') && modifiers.contains(KeyModifiers::CONTROL);
            if ctrl_c || matches!(code, KeyCode::Char('q') | KeyCode::Esc) {
                return true;
            }
        }
    }
}

async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}

/// The terminal in top's hands: alternate screen, raw mode, no cursor;
/// given back as it was when dropped.
struct Screen;

impl Screen {
    fn enter() -> std::io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let screen = Screen;
        execute!(std::io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}

/// One lock's row: its nodes' views summed up.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    resource: String,
    held_on: usize,
    /// The shortest ttl among the nodes holding it.
    ttl_ms: Option<u64>,
    /// The most waiters any node counts.
    waiters: u64,
    /// The highest fencing counter of any node.
    counter: u64,
    /// How many nodes did not answer.
    unanswered: usize,
    grants_per_second: Option<f64>,
}

/// One node's view of a lock, as a row needs it.
#[derive(Clone, Copy, Debug, Default)]
struct NodeView {
    answered: bool,
    held: bool,
    ttl_ms: Option<u64>,
    counter: u64,
    waiters: u64,
}

impl From<&NodeLockState> for NodeView {
    fn from(state: &NodeLockState) -> Self {
        NodeView {
            answered: state.error.is_none(),
            held: state.held,
            ttl_ms: state.ttl_ms,
            counter: state.fencing_counter,
            waiters: state.waiters,
        }
    }
}

impl Row {
    fn of(resource: String, views: &[NodeView]) -> Row {
        let answered = || views.iter().filter(|v| v.answered);
        Row {
            resource,
            held_on: answered().filter(|v| v.held).count(),
            ttl_ms: answered().filter(|v| v.held).filter_map(|v| v.ttl_ms).min(),
            waiters: answered().map(|v| v.waiters).max().unwrap_or(0),
            counter: answered().map(|v| v.counter).max().unwrap_or(0),
            unanswered: views.iter().filter(|v| !v.answered).count(),
            grants_per_second: None,
        }
    }
}

/// What top shows, and what it remembers between frames.
struct View<'a> {
    client: &'a Client,
    args: &'a TopArgs,
    rows: Vec<Row>,
    listed: usize,
    /// Each lock's counter at the previous frame, and when it was read.
    previous: HashMap<String, (u64, Instant)>,
    trouble: Option<String>,
}

impl<'a> View<'a> {
    fn new(client: &'a Client, args: &'a TopArgs) -> Self {
        View {
            client,
            args,
            rows: Vec::new(),
            listed: 0,
            previous: HashMap::new(),
            trouble: None,
        }
    }

    /// Reads a new frame; on failure keeps the last rows and says why.
    async fn frame(&mut self) -> fencelock::Result<()> {
        let resources = if self.args.resources.is_empty() {
            match self.client.resources(&self.args.matching, LISTED).await {
                Ok(resources) => resources,
                Err(e) => {
                    self.trouble = Some(e.to_string());
                    return Err(e);
                }
            }
        } else {
            self.args.resources.clone()
        };
        let client = self.client;
        let inspected: Vec<(String, fencelock::Result<Vec<NodeLockState>>)> =
            futures_util::stream::iter(resources)
                .map(|resource| async move {
                    let states = client.inspect(&resource).await;
                    (resource, states)
                })
                .buffer_unordered(INSPECTED_AT_ONCE)
                .collect()
                .await;
        let now = Instant::now();
        let mut rows = Vec::with_capacity(inspected.len());
        self.trouble = None;
        for (resource, states) in inspected {
            match states {
                Ok(states) => {
                    let views: Vec<NodeView> = states.iter().map(NodeView::from).collect();
                    rows.push(Row::of(resource, &views));
                }
                Err(e) => self.trouble = Some(format!("{resource}: {e}")),
            }
        }
        for row in &mut rows {
            if let Some((counter, at)) = self.previous.get(&row.resource) {
                let seconds = now.duration_since(*at).as_secs_f64();
                if seconds > 0.0 {
                    row.grants_per_second = Some(row.counter.saturating_sub(*counter) as f64 / seconds);
                }
            }
        }
        self.previous = rows
            .iter()
            .map(|r| (r.resource.clone(), (r.counter, now)))
            .collect();
        rank(&mut rows);
        self.listed = rows.len();
        rows.truncate(usize::from(self.args.limit));
        self.rows = rows;
        Ok(())
    }

    /// The frame as text of at most `lines` lines, each ended by `newline`.
    fn render(&self, lines: usize, newline: &str) -> String {
        let quorum = self.client.quorum();
        let nodes = self.client.nodes().len();
        let mut out = Vec::new();
        let what = if self.args.resources.is_empty() {
            format!("locks matching '{}'", self.args.matching)
        } else {
            "the locks named".to_owned()
        };
        out.push(format!(
            "fencelock top: {} of {what} on {nodes} node(s), quorum {quorum}, every {:?}",
            self.listed, self.args.interval
        ));
        out.push(
            self.trouble
                .as_ref()
                .map_or_else(String::new, |t| format!("error: {t}")),
        );
        let width = self
            .rows
            .iter()
            .map(|r| r.resource.len())
            .max()
            .unwrap_or(8)
            .clamp(8, 60);
        out.push(format!(
            "{:width$}  {:9}  {:>8}  {:>7}  {:>8}  {:>15}",
            "RESOURCE", "HELD", "TTL", "WAITERS", "GRANTS/S", "FENCING COUNTER"
        ));
        for row in &self.rows {
            out.push(render_row(row, quorum, nodes, width));
        }
        if out.len() > lines {
            let hidden = out.len() - lines + 1;
            out.truncate(lines.saturating_sub(1));
            out.push(format!("… {hidden} more lines (a taller terminal, or --limit)"));
        }
        let mut text = String::new();
        for line in out {
            let _ = write!(text, "{line}{newline}");
        }
        text
    }
}

fn render_row(row: &Row, quorum: usize, nodes: usize, width: usize) -> String {
    let held = if row.held_on >= quorum { "yes" } else { "no" };
    let held = format!("{held} {}/{nodes}", row.held_on);
    let ttl = row
        .ttl_ms
        .map_or_else(|| "-".to_owned(), |ms| format!("{:.1}s", ms as f64 / 1000.0));
    let rate = row
        .grants_per_second
        .map_or_else(|| "-".to_owned(), |rate| format!("{rate:.1}"));
    let mut line = format!(
        "{:width$}  {held:9}  {ttl:>8}  {:>7}  {rate:>8}  {:>15}",
        row.resource, row.waiters, row.counter
    );
    if row.unanswered > 0 {
        let _ = write!(line, "  ({} node(s) did not answer)", row.unanswered);
    }
    line
}

/// The busiest first: grants per second, then waiters, then held, then by name.
fn rank(rows: &mut [Row]) {
    rows.sort_by(|a, b| {
        let rate = |r: &Row| r.grants_per_second.unwrap_or(0.0);
        rate(b)
            .total_cmp(&rate(a))
            .then(b.waiters.cmp(&a.waiters))
            .then(b.held_on.cmp(&a.held_on))
            .then(a.resource.cmp(&b.resource))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(resource: &str, rate: Option<f64>, waiters: u64, held_on: usize) -> Row {
        Row {
            resource: resource.to_owned(),
            held_on,
            ttl_ms: None,
            waiters,
            counter: 0,
            unanswered: 0,
            grants_per_second: rate,
        }
    }

    #[test]
    fn the_busiest_lock_comes_first() {
        let mut rows = vec![
            row("idle", None, 0, 0),
            row("held", None, 0, 3),
            row("queued", Some(0.0), 4, 3),
            row("busy", Some(12.5), 0, 0),
        ];
        rank(&mut rows);
        let order: Vec<&str> = rows.iter().map(|r| r.resource.as_str()).collect();
        assert_eq!(order, ["busy", "queued", "held", "idle"]);
    }

    #[test]
    fn a_row_sums_up_the_nodes_that_answered() {
        let view = |held: bool, ttl_ms: Option<u64>, counter: u64, waiters: u64| NodeView {
            answered: true,
            held,
            ttl_ms,
            counter,
            waiters,
        };
        let views = [
            view(true, Some(900), 7, 1),
            view(true, Some(800), 6, 2),
            NodeView::default(),
        ];
        let row = Row::of("r".to_owned(), &views);
        assert_eq!(
            (row.held_on, row.ttl_ms, row.counter, row.waiters, row.unanswered),
            (2, Some(800), 7, 2, 1)
        );
        let line = render_row(&row, 2, 3, 8);
        assert!(
            line.contains("yes 2/3") && line.contains("0.8s") && line.contains("1 node(s) did not answer"),
            "{line}"
        );
    }
}
