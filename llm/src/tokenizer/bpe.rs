//! Byte-level BPE as llama.cpp runs it for `gpt2` vocabularies: each word's bytes are mapped to
//! printable characters (GPT-2's byte encoder), then adjacent symbols are merged, lowest merge
//! rank first (the leftmost pair on a tie), until no listed merge applies.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::OnceLock;

/// GPT-2's byte encoder: printable Latin-1 bytes stand for themselves, the other 68 bytes for
/// the code points from U+0100 on, in byte order.
fn byte_chars() -> &'static [char; 256] {
    static TABLE: OnceLock<[char; 256]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let printable = |b: u32| (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        let mut table = ['\0'; 256];
        let mut next = 0x100;
        for b in 0..256u32 {
            table[b as usize] = if printable(b) {
                char::from_u32(b).unwrap_or('\0')
            } else {
                next += 1;
                char::from_u32(next - 1).unwrap_or('\0')
            };
        }
        table
    })
}

/// The byte a byte-encoder character stands for.
pub fn char_byte(c: char) -> Option<u8> {
    static REVERSE: OnceLock<HashMap<char, u8>> = OnceLock::new();
    REVERSE
        .get_or_init(|| byte_chars().iter().enumerate().map(|(b, &c)| (c, b as u8)).collect())
        .get(&c)
        .copied()
}

/// The byte encoder's character for byte `b`.
pub fn encode_bytes_one(b: u8) -> char {
    byte_chars()[b as usize]
}

/// `word`'s bytes in the byte encoder's characters.
pub fn encode_bytes(word: &str) -> String {
    let table = byte_chars();
    word.bytes().map(|b| table[b as usize]).collect()
}

/// The merge list: a pair of symbols to its rank (its line in `tokenizer.ggml.merges`).
#[derive(Debug, Clone, Default)]
pub struct Merges {
    ranks: HashMap<(String, String), u32>,
}

impl Merges {
    /// Parses merge lines (`"left right"`, split at the first space after the first byte, as
    /// llama.cpp does); the first occurrence of a pair keeps its rank.
    pub fn parse(lines: &[String]) -> Merges {
        let mut ranks = HashMap::with_capacity(lines.len());
        for (rank, line) in lines.iter().enumerate() {
            let space = line.bytes().skip(1).position(|b| b == b' ').map(|p| p + 1);
            let (left, right) = match space {
                Some(pos) => (line[..pos].to_owned(), line[pos + 1..].to_owned()),
                None => (String::new(), String::new()),
            };
            ranks.entry((left, right)).or_insert(rank as u32);
        }
        Merges { ranks }
    }

    /// The number of merges.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    fn rank(&self, left: &str, right: &str) -> Option<u32> {
        // One lookup key per query; words are short, so this is not the cost that matters.
        self.ranks.get(&(left.to_owned(), right.to_owned())).copied()
    }

    /// Merges `word` (already in byte-encoder characters) into symbols, returned as slices.
    pub fn apply<'a>(&self, word: &'a str) -> Vec<&'a str> {
        // Symbols as byte ranges of `word` in a linked list; merged-away symbols have len 0.
        let start: Vec<usize> = word.char_indices().map(|(i, _)| i).collect();
        let n = start.len();
        let mut len: Vec<usize> = (0..n)
            .map(|i| start.get(i + 1).copied().unwrap_or(word.len()) - start[i])
            .collect();
        let mut prev: Vec<Option<usize>> = (0..n).map(|i| i.checked_sub(1)).collect();
        let mut next: Vec<Option<usize>> = (0..n).map(|i| (i + 1 < n).then_some(i + 1)).collect();
        // (rank, left, right, left len, right len): the lengths tell a stale pair from a live one.
        let mut queue = BinaryHeap::new();
        let text = |start: &[usize], len: &[usize], i: usize| &word[start[i]..start[i] + len[i]];
        let push = |queue: &mut BinaryHeap<_>, start: &[usize], len: &[usize], l: usize, r: usize| {
            if let Some(rank) = self.rank(text(start, len, l), text(start, len, r)) {
                queue.push(Reverse((rank, l, r, len[l], len[r])));
            }
        };
        for i in 1..n {
            push(&mut queue, &start, &len, i - 1, i);
        }
        while let Some(Reverse((_, l, r, llen, rlen))) = queue.pop() {
            if len[l] != llen || len[r] != rlen || llen == 0 || rlen == 0 {
                continue;
            }
            len[l] += len[r];
            len[r] = 0;
            next[l] = next[r];
            if let Some(nr) = next[r] {
                prev[nr] = Some(l);
            }
            if let Some(p) = prev[l] {
                push(&mut queue, &start, &len, p, l);
            }
            if let Some(nx) = next[l] {
                push(&mut queue, &start, &len, l, nx);
            }
        }
        (0..n).filter(|&i| len[i] > 0).map(|i| text(&start, &len, i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_encoder_is_a_bijection_with_space_as_g_dot() {
        assert_eq!(encode_bytes(" "), "Ġ");
        assert_eq!(encode_bytes("\n"), "Ċ");
        assert_eq!(encode_bytes("a"), "a");
        for b in 0..=255u8 {
            let c = byte_chars()[b as usize];
            assert_eq!(char_byte(c), Some(b));
        }
    }

    #[test]
    fn merges_go_by_rank_then_leftmost() {
        let merges = Merges::parse(&["a b".into(), "b c".into(), "ab c".into()]);
        // "a b" ranks first, then "ab c".
        assert_eq!(merges.apply("abc"), ["abc"]);
        // Two equal pairs: the leftmost merges first.
        assert_eq!(merges.apply("abab"), ["ab", "ab"]);
        // "b c" (rank 1) beats nothing on its left: "a" stays.
        assert_eq!(merges.apply("bca"), ["bc", "a"]);
        assert_eq!(merges.apply(""), Vec::<&str>::new());
    }
}
