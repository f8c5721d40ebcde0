//! Reading a program's output with bounded memory: the lines a caller asks for, each cut to a
//! length, and at most the last so many bytes of them. Upstream's `test-backend-ops` may print
//! without end (a runaway log, a loop); `compare` needs only its result lines and the last lines
//! of its error output.

use std::collections::VecDeque;
use std::io::{BufRead, ErrorKind};

/// How much of a stream is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// Bytes kept of one line (its start); the rest of it is read and dropped.
    pub max_line: usize,
    /// Bytes kept in all: the earliest kept lines are dropped to stay under it.
    pub max_total: usize,
}

/// Reads `reader` to its end (so that the writer never blocks on a full pipe) and returns the
/// lines `keep` accepts (each cut to [`Cap::max_line`] bytes before `keep` sees it; invalid UTF-8
/// replaced), the last [`Cap::max_total`] bytes' worth of them, each ending in `\n`. A read error
/// ends the stream there.
pub fn keep_lines(mut reader: impl BufRead, cap: Cap, keep: impl Fn(&str) -> bool) -> String {
    let mut kept: VecDeque<String> = VecDeque::new();
    let mut total = 0usize;
    let mut line: Vec<u8> = Vec::new();
    let mut finish_line = |line: &mut Vec<u8>| {
        let text = String::from_utf8_lossy(line).into_owned();
        line.clear();
        if !keep(&text) {
            return;
        }
        total += text.len() + 1;
        kept.push_back(text);
        while total > cap.max_total
            && let Some(old) = kept.pop_front()
        {
            total -= old.len() + 1;
        }
    };
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) => break,
            Ok(chunk) => chunk,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let (used, ends_line) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (chunk.len(), false),
        };
        let content = &chunk[..used - usize::from(ends_line)];
        let room = cap.max_line.saturating_sub(line.len());
        line.extend_from_slice(&content[..content.len().min(room)]);
        reader.consume(used);
        if ends_line {
            finish_line(&mut line);
        }
    }
    if !line.is_empty() {
        finish_line(&mut line);
    }
    let mut out = String::with_capacity(total);
    for text in kept {
        out.push_str(&text);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Read};

    /// `size` bytes of output that a buffer-everything reader would hold whole: short noise
    /// lines, one line of 16 MiB without a break, then `last`.
    struct Flood {
        produced: usize,
        size: usize,
        last: Vec<u8>,
    }

    impl Read for Flood {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.produced >= self.size {
                let n = self.last.len().min(buf.len());
                buf[..n].copy_from_slice(&self.last[..n]);
                self.last.drain(..n);
                return Ok(n);
            }
            let n = buf.len().min(self.size - self.produced);
            for (i, b) in buf[..n].iter_mut().enumerate() {
                let at = self.produced + i;
                let in_long_line = (16 << 20..32 << 20).contains(&at);
                *b = if !in_long_line && at % 64 == 63 { b'\n' } else { b'x' };
            }
            self.produced += n;
            Ok(n)
        }
    }

    #[test]
    fn a_flood_of_output_keeps_only_what_is_asked_within_the_cap() {
        let cap = Cap {
            max_line: 4096,
            max_total: 1 << 20,
        };
        let result = "  MUL_MAT(type_a=f16): 10 runs - 2.5 us/run\n3/3 backends passed\n";
        let flood = Flood {
            produced: 0,
            size: 256 << 20,
            last: result.as_bytes().to_vec(),
        };
        let kept = keep_lines(BufReader::new(flood), cap, |l| {
            l.contains("MUL_MAT(") || l.contains("backends passed")
        });
        assert_eq!(kept, result);
        // Everything kept: only the last `max_total` bytes, each line cut to `max_line`.
        let all = Flood {
            produced: 0,
            size: 64 << 20,
            last: b"end without a newline".to_vec(),
        };
        let kept = keep_lines(BufReader::new(all), cap, |_| true);
        assert!(kept.len() <= cap.max_total, "{}", kept.len());
        assert!(kept.lines().all(|l| l.len() <= cap.max_line));
        assert!(
            kept.ends_with("xxx\nend without a newline\n"),
            "{}",
            &kept[kept.len() - 80..]
        );
    }
}
