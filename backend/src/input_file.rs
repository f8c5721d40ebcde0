//! Reading the files a user names (GGUF models, golden files, cases files, saved output):
//! regular files only, of bounded size, and never a wait.
//!
//! A FIFO, a character device or a socket at the path would make an ordinary `open` or `read`
//! wait forever (a FIFO's `open` blocks until a writer comes) or never end (`/dev/zero`). The
//! path is checked first without opening it, then opened with `O_NONBLOCK` (which leaves reads of
//! a regular file unchanged) and checked again on the open file, so that a file swapped for a
//! FIFO in between is refused, not waited on.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum InputFileError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a regular file ({kind}); give a file")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path}: larger than {max} bytes")]
    TooLarge { path: PathBuf, max: u64 },
}

/// What a path that is not a regular file is, in words.
fn kind_of(file_type: std::fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        None
    } else if file_type.is_dir() {
        Some("a folder")
    } else if file_type.is_fifo() {
        Some("a FIFO")
    } else if file_type.is_char_device() {
        Some("a character device")
    } else if file_type.is_block_device() {
        Some("a block device")
    } else if file_type.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

/// Opens `path` for reading if it is a regular file (symbolic links followed), without ever
/// blocking: see the module's documentation.
pub fn open_regular(path: &Path) -> Result<File, InputFileError> {
    let io = |source| InputFileError::Io {
        path: path.to_owned(),
        source,
    };
    let refuse = |kind| InputFileError::NotRegular {
        path: path.to_owned(),
        kind,
    };
    if let Some(kind) = kind_of(std::fs::metadata(path).map_err(io)?.file_type()) {
        return Err(refuse(kind));
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    if let Some(kind) = kind_of(file.metadata().map_err(io)?.file_type()) {
        return Err(refuse(kind));
    }
    Ok(file)
}

/// The bytes of the regular file `path`, of at most `max` bytes.
pub fn read_bytes(path: &Path, max: u64) -> Result<Vec<u8>, InputFileError> {
    let file = open_regular(path)?;
    let too_large = || InputFileError::TooLarge {
        path: path.to_owned(),
        max,
    };
    let len = file
        .metadata()
        .map_err(|source| InputFileError::Io {
            path: path.to_owned(),
            source,
        })?
        .len();
    if len > max {
        return Err(too_large());
    }
    // The length is checked again as read: the file may grow meanwhile.
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| InputFileError::Io {
            path: path.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A FIFO nobody writes to: `open` of it without `O_NONBLOCK` would wait forever.
    fn fifo(dir: &Path) -> PathBuf {
        let path = dir.join("fifo");
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
        let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
        assert_eq!(rc, 0, "mkfifo {}", path.display());
        path
    }

    #[test]
    fn fifos_devices_and_folders_are_refused_at_once() {
        let dir = std::env::temp_dir().join(format!("input-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = fifo(&dir);
        let link = dir.join("link-to-fifo");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        let start = Instant::now();
        for (path, kind) in [
            (fifo.as_path(), "a FIFO"),
            (link.as_path(), "a FIFO"),
            (Path::new("/dev/zero"), "a character device"),
            (dir.as_path(), "a folder"),
        ] {
            let err = read_bytes(path, 1 << 20).unwrap_err();
            assert!(
                matches!(err, InputFileError::NotRegular { kind: k, .. } if k == kind),
                "{err}"
            );
            assert!(err.to_string().contains(&path.display().to_string()), "{err}");
        }
        assert!(start.elapsed() < Duration::from_secs(5));
        let file = dir.join("f.txt");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_bytes(&file, 5).unwrap(), b"12345");
        assert!(matches!(
            read_bytes(&file, 4),
            Err(InputFileError::TooLarge { max: 4, .. })
        ));
        assert!(matches!(
            read_bytes(&dir.join("absent"), 4),
            Err(InputFileError::Io { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
