//! `oracle.model-side.steering`: a steering message reaches the root's next request, and wakes a
//! held root at once.
//!
//! The harness knows what it sent and when (the run's setup); the model side shows when the root
//! asked and with what. `bub.steer.reaches-parent-only`: the root reads a steering message before
//! its next step, so the root's first request from the instant it was sent holds it (a root
//! whose steps are gone reads it at its next turn's first request, which is that request too).
//! `bub.steer.wakes-held-root`: a root held after an answer (`bub.turn.held-while-children`)
//! asks again in the instant the steering reaches it, so a request that goes on from an answer
//! and gains only steering, notifications and notices comes no later than the first of its
//! steering messages could wake it. Judged on virtual time only: on a runtime's own clock the
//! instants are not shared.

use std::time::Duration;

use crate::dialect::Dialect;
use crate::evidence::Setup;
use crate::evidence::attribution::ModelSide;
use crate::sut::llm::Role;

use super::{Out, keeps_reply};

/// `oracle.model-side.steering`.
pub(super) fn steering(side: &ModelSide, dialect: &Dialect, setup: Option<&Setup>, out: &mut Out) {
    let Some(setup) = setup.filter(|s| !s.steering.is_empty()) else { return };
    if side.wall_times {
        return;
    }
    let Some(root) = out.agents.of.keys().find(|a| a.depth() == 0) else { return };
    let requests = out.agents.exchanges(root);
    let holds =
        |i: usize, text: &str| side.exchanges[i].messages.iter().any(|m| m.role == Role::User && m.content == text);
    let mut findings = Vec::new();
    for (sent, text) in &setup.steering {
        let Some(&(first, _)) = requests.iter().find(|&&(i, _)| side.exchanges[i].arrived >= *sent) else { continue };
        if !holds(first, text) {
            findings.push((
                first,
                format!(
                    "the steering message {text:?}, sent to the root at {}, is not in the root's first request since (at {}): the root reads it before its next step",
                    ms(*sent),
                    ms(side.exchanges[first].arrived)
                ),
            ));
        }
    }
    // A held root woken late: a request that goes on from an answer and gains only steering,
    // notifications and notices.
    for pair in requests.windows(2) {
        let ((p, _), (r, _)) = (pair[0], pair[1]);
        let (before, now) = (&side.exchanges[p], &side.exchanges[r]);
        let (Some(reply), Some(replied)) = (&before.reply, before.replied) else { continue };
        if dialect.final_text(reply).is_none() {
            continue;
        }
        if !keeps_reply(side, p, r) {
            continue;
        }
        let at = before.messages.len();
        let gained: Vec<&str> = now.messages.iter().skip(at + 1).map(|m| m.content.as_str()).collect();
        // Steering sent once the root had answered (one sent before waits in its inbox, which
        // the rules do not say the hold looks at).
        let steered: Vec<Duration> = setup
            .steering
            .iter()
            .filter(|(s, t)| *s >= replied && gained.contains(&t.as_str()))
            .map(|(s, _)| *s)
            .collect();
        let only = now.messages.iter().skip(at + 1).all(|m| {
            m.role == Role::User
                && (setup.steering.iter().any(|(_, t)| *t == m.content)
                    || dialect.notified(&m.content).is_some()
                    || dialect.notices.iter().any(|n| m.content.starts_with(n.as_str())))
        });
        let Some(&wake) = steered.iter().min() else { continue };
        if only && now.arrived > wake {
            findings.push((
                r,
                format!(
                    "the root answered at {} and was held; the steering message sent at {} should have woken it then, but it asked again only at {}",
                    ms(replied),
                    ms(wake),
                    ms(now.arrived)
                ),
            ));
        }
    }
    for (i, message) in findings {
        out.at("steering", "oracle.model-side.steering", i, message, None);
    }
}

/// A virtual instant as findings print it.
fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}
