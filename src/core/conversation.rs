//! A conversation that forks in O(1): the message history of one agent or session.
//!
//! A conversation is a chain of frozen, shared segments plus a private tail. Forking freezes
//! the tail into a new segment that both sides share, then hands the copy an empty tail. No
//! segment is ever mutated after freezing, and pushing only ever touches a private tail, so a
//! fork cannot see what the other side writes afterwards: isolation is structural.

use std::sync::Arc;

use crate::sut::llm::Message;

struct Segment {
    before: Option<Arc<Segment>>,
    messages: Vec<Message>,
    /// Messages in this segment and all before it.
    len: usize,
}

/// An append-only message history.
#[derive(Clone, Default)]
pub struct Conversation {
    frozen: Option<Arc<Segment>>,
    tail: Vec<Message>,
}

impl Conversation {
    /// An empty conversation.
    pub fn new() -> Conversation {
        Conversation::default()
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.frozen.as_ref().map_or(0, |s| s.len) + self.tail.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        self.tail.push(message);
    }

    /// A copy that shares everything so far and diverges from here on.
    pub fn fork(&mut self) -> Conversation {
        if !self.tail.is_empty() {
            let messages = std::mem::take(&mut self.tail);
            let len = self.len() + messages.len();
            self.frozen = Some(Arc::new(Segment { before: self.frozen.take(), messages, len }));
        }
        Conversation { frozen: self.frozen.clone(), tail: Vec::new() }
    }

    /// A fork holding only the first `len` messages. Shares the frozen segments and copies
    /// only the part of the private tail it keeps (a cut inside the frozen segments, which no
    /// caller makes, copies everything).
    pub fn fork_prefix(&mut self, len: usize) -> Conversation {
        let frozen_len = self.frozen.as_ref().map_or(0, |s| s.len);
        if len >= self.len() {
            self.fork()
        } else if len >= frozen_len {
            Conversation { frozen: self.frozen.clone(), tail: self.tail[..len - frozen_len].to_vec() }
        } else {
            Conversation { frozen: None, tail: self.to_vec()[..len].to_vec() }
        }
    }

    /// The messages in order, cloned.
    pub fn to_vec(&self) -> Vec<Message> {
        let mut segments = Vec::new();
        let mut at = self.frozen.as_deref();
        while let Some(segment) = at {
            segments.push(segment);
            at = segment.before.as_deref();
        }
        let mut out = Vec::with_capacity(self.len());
        for segment in segments.iter().rev() {
            out.extend(segment.messages.iter().cloned());
        }
        out.extend(self.tail.iter().cloned());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(c: &Conversation) -> Vec<String> {
        c.to_vec().into_iter().map(|m| m.content).collect()
    }

    #[test]
    fn a_fork_never_sees_later_writes_of_either_side() {
        let mut parent = Conversation::new();
        parent.push(Message::user("a"));
        parent.push(Message::user("b"));
        let mut child = parent.fork();
        parent.push(Message::user("parent later"));
        child.push(Message::user("child later"));
        assert_eq!(texts(&parent), ["a", "b", "parent later"]);
        assert_eq!(texts(&child), ["a", "b", "child later"]);
        let grandchild = child.fork();
        child.push(Message::user("x"));
        assert_eq!(texts(&grandchild), ["a", "b", "child later"]);
        assert_eq!(parent.len(), 3);
    }

    #[test]
    fn fork_prefix_cuts_at_the_given_length() {
        let mut c = Conversation::new();
        for t in ["a", "b", "c"] {
            c.push(Message::user(t));
        }
        assert_eq!(texts(&c.fork_prefix(2)), ["a", "b"]);
        assert_eq!(texts(&c.fork_prefix(9)), ["a", "b", "c"]);
        let _shared = c.fork();
        c.push(Message::user("d"));
        c.push(Message::user("e"));
        assert_eq!(texts(&c.fork_prefix(4)), ["a", "b", "c", "d"]);
        assert_eq!(texts(&c.fork_prefix(1)), ["a"]);
    }
}
