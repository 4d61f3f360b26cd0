//! Reading the small text files a launch depends on (configuration, pin,
//! resolv.conf, managed settings) without trusting what is at the path: a
//! FIFO would block the launch forever, a directory or device is no
//! configuration, and a multi-megabyte file is a mistake, not a setting.
//! And the two ways of writing one the project's records and the user's
//! files are written: a new file of an exact mode, or one replaced at once.

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Why a file could not be read as a small text file.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Nothing at the path.
    Missing,
    /// Something that is not a regular file; names what it is.
    NotAFile(&'static str),
    /// Larger than the limit; the size found.
    TooLarge(u64),
    /// Not UTF-8.
    NotText,
    /// Any other I/O failure (permissions, …).
    Io(std::io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Missing => f.write_str("it does not exist"),
            ReadError::NotAFile(kind) => write!(f, "it is a {kind}, not a regular file"),
            ReadError::TooLarge(n) => {
                write!(f, "it is {n} bytes long, over the {} byte limit", LIMIT)
            }
            ReadError::NotText => f.write_str("it is not valid UTF-8 text"),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// The most any of these files may hold (a configuration is a few lines).
pub(crate) const LIMIT: u64 = 1 << 20;

fn kind(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Open `path` for reading if it is a regular file, with its metadata.
/// Opens without blocking (a FIFO is refused, never waited on) and checks
/// the opened file, not the name, so a swap between check and read changes
/// nothing. For files of any size read as a stream (the egress report).
pub(crate) fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), ReadError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ReadError::Missing,
            _ => ReadError::Io(e),
        })?;
    let meta = f.metadata().map_err(ReadError::Io)?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotAFile(kind(&meta.file_type())));
    }
    Ok((f, meta))
}

/// Read `path` as UTF-8 text of at most [`LIMIT`] bytes. Opens without
/// blocking (a FIFO is refused, never waited on) and checks the opened file,
/// not the name, so a swap between check and read changes nothing.
pub(crate) fn read_text(path: &Path) -> Result<String, ReadError> {
    let (f, meta) = open_regular(path)?;
    if meta.len() > LIMIT {
        return Err(ReadError::TooLarge(meta.len()));
    }
    let mut bytes = Vec::new();
    f.take(LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > LIMIT {
        return Err(ReadError::TooLarge(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotText)
}

/// Replace `path` with `bytes` (mode `mode`) all at once: a temporary file
/// in the same directory, renamed over it.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".csb-{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = write_new(&tmp, bytes, mode).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A new file at `path` (nothing may be there) holding `bytes`, with
/// exactly `mode` (the umask does not narrow it), on the disk when this
/// returns.
pub(crate) fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_small_text_file() {
        let dir = std::env::temp_dir().join(format!("csb-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = |n: &str| dir.join(n);
        std::fs::write(p("ok"), "egress-jail = 1\n").unwrap();
        assert_eq!(read_text(&p("ok")).unwrap(), "egress-jail = 1\n");
        assert!(matches!(read_text(&p("none")), Err(ReadError::Missing)));
        assert!(matches!(
            read_text(&dir),
            Err(ReadError::NotAFile("directory"))
        ));
        nix::unistd::mkfifo(&p("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Returns at once: nobody writes to this FIFO.
        assert!(matches!(
            read_text(&p("fifo")),
            Err(ReadError::NotAFile("FIFO"))
        ));
        std::fs::write(p("big"), vec![b'#'; (LIMIT + 1) as usize]).unwrap();
        assert!(matches!(read_text(&p("big")), Err(ReadError::TooLarge(n)) if n == LIMIT + 1));
        std::fs::write(p("latin1"), b"allow-write = /caf\xe9\n").unwrap();
        assert!(matches!(read_text(&p("latin1")), Err(ReadError::NotText)));
        assert!(matches!(
            read_text(Path::new("/dev/null")),
            Err(ReadError::NotAFile("character device"))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
