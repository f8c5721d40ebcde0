//! SentencePiece-style tokenization as llama.cpp runs it for `llama` vocabularies: symbols
//! start as single characters; the adjacent pair whose concatenation is a token with the highest
//! score merges first (the leftmost on a tie), until no pair forms a token. A symbol left that
//! is not a token is emitted as its bytes' `<0xXX>` tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A candidate merge: ordered by score, then by leftmost position.
#[derive(Debug, PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl Eq for Bigram {}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Splits `text` into the symbols the merges leave, as slices; `score` gives the score of a
/// token with that text, or `None` when there is no such token.
pub fn segment(text: &str, score: impl Fn(&str) -> Option<f32>) -> Vec<&str> {
    let start: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let n = start.len();
    let mut len: Vec<usize> = (0..n)
        .map(|i| start.get(i + 1).copied().unwrap_or(text.len()) - start[i])
        .collect();
    let mut prev: Vec<Option<usize>> = (0..n).map(|i| i.checked_sub(1)).collect();
    let mut next: Vec<Option<usize>> = (0..n).map(|i| (i + 1 < n).then_some(i + 1)).collect();
    let mut queue = BinaryHeap::new();
    let try_add = |queue: &mut BinaryHeap<Bigram>, len: &[usize], left: usize, right: usize| {
        let size = len[left] + len[right];
        if let Some(score) = score(&text[start[left]..start[left] + size]) {
            queue.push(Bigram {
                score,
                left,
                right,
                size,
            });
        }
    };
    for i in 1..n {
        try_add(&mut queue, &len, i - 1, i);
    }
    while let Some(b) = queue.pop() {
        if len[b.left] == 0 || len[b.right] == 0 || len[b.left] + len[b.right] != b.size {
            continue;
        }
        len[b.left] += len[b.right];
        len[b.right] = 0;
        next[b.left] = next[b.right];
        if let Some(nr) = next[b.right] {
            prev[nr] = Some(b.left);
        }
        if let Some(p) = prev[b.left] {
            try_add(&mut queue, &len, p, b.left);
        }
        if let Some(nx) = next[b.left] {
            try_add(&mut queue, &len, b.left, nx);
        }
    }
    (0..n)
        .filter(|&i| len[i] > 0)
        .map(|i| &text[start[i]..start[i] + len[i]])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_scoring_pair_merges_first() {
        let score = |s: &str| match s {
            "ab" => Some(-1.0),
            "bc" => Some(-0.5),
            "bcd" => Some(-2.0),
            _ => None,
        };
        // "bc" scores higher than "ab", and "a"+"bc" is no token.
        assert_eq!(segment("abc", score), ["a", "bc"]);
        assert_eq!(segment("ab", score), ["ab"]);
        // Merged symbols merge on: "bc" then "bcd".
        assert_eq!(segment("abcd", score), ["a", "bcd"]);
        // A tie goes to the leftmost pair.
        let flat = |s: &str| (s == "aa").then_some(0.0);
        assert_eq!(segment("aaa", flat), ["aa", "a"]);
    }
}
