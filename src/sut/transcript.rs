//! [`Transcript`]: an agent's conversation, append-only, whose copies share every message.
//!
//! A transcript is a persistent list: each message is stored once, in a node that points at
//! the messages before it. Appending makes one new node; cloning copies one pointer; a fork
//! (a child that starts from its parent's conversation) shares everything up to the fork and
//! diverges from there. So a model request can carry the whole conversation at the cost of a
//! pointer, the harness can keep every request of a run without copying a message, and two
//! holders can never see each other's later writes: isolation is structural.
//!
//! Reading forward collects the node pointers first (one allocation of `len` pointers);
//! reading backward ([`Transcript::iter_rev`]) and [`Transcript::since`] (the messages added
//! after an earlier copy) allocate nothing beyond their result.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

use super::llm::Message;

struct Node {
    message: Message,
    before: Option<Arc<Node>>,
    /// Messages up to and including this one.
    len: usize,
}

/// An append-only conversation whose clones share every message.
#[derive(Clone, Default)]
pub struct Transcript {
    last: Option<Arc<Node>>,
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Transcript {
        Transcript::default()
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.last.as_ref().map_or(0, |n| n.len)
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.last.is_none()
    }

    /// Appends a message. Copies made before keep seeing what they saw.
    pub fn push(&mut self, message: Message) {
        let len = self.len() + 1;
        self.last = Some(Arc::new(Node { message, before: self.last.take(), len }));
    }

    /// The last message.
    pub fn last(&self) -> Option<&Message> {
        self.last.as_deref().map(|n| &n.message)
    }

    /// The first message.
    pub fn first(&self) -> Option<&Message> {
        self.iter_rev().last()
    }

    /// The `index`-th message (from 0). Walks back from the end.
    pub fn get(&self, index: usize) -> Option<&Message> {
        let len = self.len();
        if index >= len {
            return None;
        }
        self.iter_rev().nth(len - 1 - index)
    }

    /// The messages from the last to the first; allocates nothing.
    pub fn iter_rev(&self) -> impl Iterator<Item = &Message> + '_ {
        self.nodes_back().map(|node| &node.message)
    }

    /// The messages in order.
    pub fn iter(&self) -> std::iter::Rev<std::vec::IntoIter<&Message>> {
        let mut nodes: Vec<&Message> = Vec::with_capacity(self.len());
        nodes.extend(self.iter_rev());
        nodes.into_iter().rev()
    }

    /// The messages in order, cloned.
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// A transcript holding the first `len` messages (all of them when `len` is larger), sharing
    /// them with this one.
    pub fn prefix(&self, len: usize) -> Transcript {
        let mut at = self.last.as_ref();
        while let Some(node) = at
            && node.len > len
        {
            at = node.before.as_ref();
        }
        Transcript { last: at.cloned() }
    }

    /// Whether `earlier` is this transcript's beginning as the same stored messages (a copy
    /// this one grew from), found without comparing message contents.
    pub fn extends(&self, earlier: &Transcript) -> bool {
        let Some(want) = earlier.last.as_deref() else { return true };
        let at = self.nodes_back().find(|node| node.len <= want.len);
        at.is_some_and(|node| std::ptr::eq(node, want))
    }

    /// The messages added since `earlier`, in order, when this transcript grew from it
    /// ([`Transcript::extends`]); `None` otherwise. One walk back, no reference counting.
    pub fn since(&self, earlier: &Transcript) -> Option<Vec<&Message>> {
        let want = earlier.last.as_deref();
        let since = want.map_or(0, |node| node.len);
        let mut added: Vec<&Message> = Vec::with_capacity(self.len().saturating_sub(since));
        let mut at = self.last.as_deref();
        while let Some(node) = at
            && node.len > since
        {
            added.push(&node.message);
            at = node.before.as_deref();
        }
        let grew = match (want, at) {
            (None, _) => true,
            (Some(want), Some(node)) => std::ptr::eq(node, want),
            (Some(_), None) => false,
        };
        grew.then(|| {
            added.reverse();
            added
        })
    }

    /// The nodes from the last to the first.
    fn nodes_back(&self) -> impl Iterator<Item = &Node> + '_ {
        let mut at = self.last.as_deref();
        std::iter::from_fn(move || {
            let node = at?;
            at = node.before.as_deref();
            Some(node)
        })
    }

    /// Whether this transcript begins with exactly the messages of `other`.
    pub fn starts_with(&self, other: &Transcript) -> bool {
        other.len() <= self.len() && (self.extends(other) || self.prefix(other.len()) == *other)
    }
}

impl Drop for Transcript {
    /// Unlinks the nodes this transcript alone holds one at a time: dropping a long chain
    /// recursively would overflow the stack.
    fn drop(&mut self) {
        let mut at = self.last.take();
        while let Some(node) = at {
            match Arc::try_unwrap(node) {
                Ok(mut node) => at = node.before.take(),
                Err(_) => break,
            }
        }
    }
}

impl PartialEq for Transcript {
    fn eq(&self, other: &Transcript) -> bool {
        if self.len() != other.len() {
            return false;
        }
        let mut a = self.last.as_ref();
        let mut b = other.last.as_ref();
        while let (Some(x), Some(y)) = (a, b) {
            if Arc::ptr_eq(x, y) {
                return true;
            }
            if x.message != y.message {
                return false;
            }
            (a, b) = (x.before.as_ref(), y.before.as_ref());
        }
        true
    }
}

impl PartialEq<[Message]> for Transcript {
    fn eq(&self, other: &[Message]) -> bool {
        self.len() == other.len() && self.iter_rev().eq(other.iter().rev())
    }
}

impl PartialEq<Vec<Message>> for Transcript {
    fn eq(&self, other: &Vec<Message>) -> bool {
        *self == other[..]
    }
}

impl fmt::Debug for Transcript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for Transcript {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        for message in self.iter() {
            seq.serialize_element(message)?;
        }
        seq.end()
    }
}

impl FromIterator<Message> for Transcript {
    fn from_iter<I: IntoIterator<Item = Message>>(messages: I) -> Transcript {
        let mut transcript = Transcript::new();
        for message in messages {
            transcript.push(message);
        }
        transcript
    }
}

impl Extend<Message> for Transcript {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, messages: I) {
        for message in messages {
            self.push(message);
        }
    }
}

impl From<Vec<Message>> for Transcript {
    fn from(messages: Vec<Message>) -> Transcript {
        messages.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a Transcript {
    type Item = &'a Message;
    type IntoIter = std::iter::Rev<std::vec::IntoIter<&'a Message>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(t: &Transcript) -> Vec<String> {
        t.iter().map(|m| m.content.clone()).collect()
    }

    #[test]
    fn copies_never_see_later_writes_of_either_side() {
        let mut parent: Transcript = ["a", "b"].into_iter().map(Message::user).collect();
        let mut child = parent.clone();
        parent.push(Message::user("parent later"));
        child.push(Message::user("child later"));
        assert_eq!(texts(&parent), ["a", "b", "parent later"]);
        assert_eq!(texts(&child), ["a", "b", "child later"]);
        assert_eq!(parent.len(), 3);
        assert_eq!(parent.get(1).map(|m| m.content.as_str()), Some("b"));
        assert_eq!(parent.first().map(|m| m.content.as_str()), Some("a"));
        assert_eq!(parent.get(3), None);
    }

    #[test]
    fn prefix_since_and_starts_with() {
        let mut t: Transcript = ["a", "b", "c"].into_iter().map(Message::user).collect();
        let early = t.prefix(2);
        assert_eq!(texts(&early), ["a", "b"]);
        assert_eq!(texts(&t.prefix(9)), ["a", "b", "c"]);
        t.push(Message::user("d"));
        let added: Vec<&str> = t.since(&early).unwrap().iter().map(|m| m.content.as_str()).collect();
        assert_eq!(added, ["c", "d"]);
        assert!(t.extends(&early) && t.starts_with(&early));
        // The same contents stored apart: not grown from it, but it starts with them.
        let apart: Transcript = ["a", "b"].into_iter().map(Message::user).collect();
        assert!(t.since(&apart).is_none());
        assert!(t.starts_with(&apart));
        assert_eq!(apart, early);
        assert!(!early.starts_with(&t));
    }

    #[test]
    fn a_long_transcript_drops_without_recursion() {
        let t: Transcript = (0..200_000).map(|i| Message::user(i.to_string())).collect();
        let keep = t.prefix(10);
        drop(t);
        assert_eq!(keep.len(), 10);
    }
}
