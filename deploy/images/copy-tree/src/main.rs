//! `cairn-copy-tree [--file-mode MODE] SRC DEST`: makes DEST an exact copy of SRC, a directory
//! tree or one file, the way an image with no shell puts files where they are needed: the
//! runners' module library onto the node, tenancy's signing keys from a Secret volume into
//! a file only its user may read. Symbolic links are followed, and entries whose names start
//! with `..` (the Secret volume's own bookkeeping) are skipped. Permissions are kept, or,
//! with `--file-mode` (octal), every file gets that mode (directories 0700). The copy is made
//! next to DEST and renamed into place, so DEST is never half written; an old DEST is
//! removed first. Exit 0 on success, 1 naming the failing path, 2 on a usage error.
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str =
    "usage: cairn-copy-tree [--file-mode OCTAL] SRC DEST (DEST becomes a copy of SRC)";

type Failure = (PathBuf, io::Error);

fn at(path: &Path) -> impl FnOnce(io::Error) -> Failure + '_ {
    move |e| (path.to_path_buf(), e)
}

fn copy_tree(src: &Path, dest: &Path, file_mode: Option<u32>) -> Result<(), Failure> {
    let meta = fs::metadata(src).map_err(at(src))?;
    if meta.is_dir() {
        fs::create_dir(dest).map_err(at(dest))?;
        for entry in fs::read_dir(src).map_err(at(src))? {
            let entry = entry.map_err(at(src))?;
            if entry.file_name().to_string_lossy().starts_with("..") {
                continue;
            }
            copy_tree(&entry.path(), &dest.join(entry.file_name()), file_mode)?;
        }
        let mode = file_mode.map_or(meta.permissions(), |_| fs::Permissions::from_mode(0o700));
        fs::set_permissions(dest, mode).map_err(at(dest))
    } else if meta.is_file() {
        fs::copy(src, dest).map_err(at(src))?;
        match file_mode {
            Some(mode) => {
                fs::set_permissions(dest, fs::Permissions::from_mode(mode)).map_err(at(dest))
            }
            None => Ok(()),
        }
    } else {
        let e = io::Error::new(
            io::ErrorKind::InvalidInput,
            "neither a file nor a directory",
        );
        Err((src.to_path_buf(), e))
    }
}

fn remove_if_present(path: &Path) -> Result<(), Failure> {
    let removed = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) => Err(e),
    };
    match removed {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err((path.to_path_buf(), e)),
        _ => Ok(()),
    }
}

fn install(src: &Path, dest: &Path, file_mode: Option<u32>) -> Result<(), Failure> {
    let Some(name) = dest.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        let e = io::Error::new(io::ErrorKind::InvalidInput, "DEST has no file name");
        return Err((dest.to_path_buf(), e));
    };
    let staging = dest.with_file_name(format!(".{name}.copy-tree-{}", std::process::id()));
    remove_if_present(&staging)?;
    copy_tree(src, &staging, file_mode)?;
    remove_if_present(dest)?;
    fs::rename(&staging, dest).map_err(at(dest))
}

fn main() -> ExitCode {
    let mut args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.len() == 1 && (args[0] == "--help" || args[0] == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let mut file_mode = None;
    if args.len() == 4 && args[0] == "--file-mode" {
        match args[1]
            .to_str()
            .and_then(|m| u32::from_str_radix(m, 8).ok())
        {
            Some(mode) if mode <= 0o777 => file_mode = Some(mode),
            _ => {
                eprintln!("cairn-copy-tree: --file-mode takes an octal mode such as 600\n{USAGE}");
                return ExitCode::from(2);
            }
        }
        args.drain(..2);
    }
    let [src, dest] = args.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let (src, dest) = (Path::new(src), Path::new(dest));
    match install(src, dest, file_mode) {
        Ok(()) => {
            println!("copied {} to {}", src.display(), dest.display());
            ExitCode::SUCCESS
        }
        Err((path, e)) => {
            eprintln!("cairn-copy-tree: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
