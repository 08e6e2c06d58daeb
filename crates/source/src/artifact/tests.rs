use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;

use super::*;
use crate::Error;

/// One raw entry of a hand-made tarball; names are written as they are, unchecked.
struct Raw<'a> {
    name: &'a str,
    kind: tar::EntryType,
    link: &'a str,
    data: &'a [u8],
}

fn file<'a>(name: &'a str, data: &'a [u8]) -> Raw<'a> {
    Raw {
        name,
        kind: tar::EntryType::Regular,
        link: "",
        data,
    }
}

fn symlink<'a>(name: &'a str, link: &'a str) -> Raw<'a> {
    Raw {
        name,
        kind: tar::EntryType::Symlink,
        link,
        data: b"",
    }
}

fn raw_tarball(entries: &[Raw<'_>]) -> Vec<u8> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        let name = entry.name.as_bytes();
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        let link = entry.link.as_bytes();
        header.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        header.set_entry_type(entry.kind);
        header.set_mode(0o644);
        header.set_size(entry.data.len() as u64);
        header.set_cksum();
        builder.append(&header, entry.data).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

/// Lists everything below `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            out.push(path.strip_prefix(root).unwrap().display().to_string());
            if entry.file_type().unwrap().is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Extracts `tarball` into `<temp>/work/out` and checks nothing at all was left in `<temp>/work`
/// (no target, no temporary directory) and nothing written next to it.
fn refused(tarball: &[u8], limits: &Limits) -> Error {
    let temp = tempfile::tempdir().unwrap();
    let work = temp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let error = extract(tarball, &work.join("out"), limits).unwrap_err();
    assert_eq!(
        tree(temp.path()),
        vec!["work".to_owned()],
        "left behind after: {error}"
    );
    error
}

fn sample_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("a/x.yaml"), "x: 1\n").unwrap();
    std::fs::write(root.join("a/b/y.yaml"), "y: 2\n").unwrap();
    std::fs::write(root.join("a.txt"), "top\n").unwrap();
    std::fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    dir
}

fn entries_of(tarball: &[u8]) -> Vec<(String, tar::EntryType, u32, u64, u64, u64)> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tarball));
    archive
        .entries()
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let header = entry.header();
            (
                String::from_utf8(entry.path_bytes().into_owned()).unwrap(),
                header.entry_type(),
                header.mode().unwrap(),
                header.uid().unwrap(),
                header.gid().unwrap(),
                header.mtime().unwrap(),
            )
        })
        .collect()
}

#[test]
fn pack_writes_flux_layout() {
    let dir = sample_tree();
    let mut out = Vec::new();
    let options = PackOptions {
        filter: None,
        modes: ModePolicy::Normalize,
        limits: None,
    };
    let packed = pack(dir.path(), &mut out, &options).unwrap();
    let entries = entries_of(&out);
    let names: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    // Lexical, depth first, root first, no trailing slash, symlink skipped.
    assert_eq!(
        names,
        [".", "a", "a/b", "a/b/y.yaml", "a/x.yaml", "a.txt", "run.sh"]
    );
    for (name, kind, mode, uid, gid, mtime) in &entries {
        assert_eq!((*uid, *gid, *mtime), (0, 0, 0), "{name}");
        let expected = match (kind.is_dir(), name.as_str()) {
            (true, _) => STORAGE_DIR_MODE,
            (false, "run.sh") => STORAGE_EXE_MODE,
            _ => STORAGE_FILE_MODE,
        };
        assert_eq!(*mode, expected, "{name}");
    }
    assert_eq!(packed.entries, 7);
    assert_eq!(packed.size, out.len() as u64);
    assert_eq!(packed.digest, crate::Digest::of(&out));
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(&out[..])
        .read_to_end(&mut tar)
        .unwrap();
    assert_eq!(packed.diff_id, crate::Digest::of(&tar));
}

#[test]
fn pack_preserves_modes_and_is_deterministic() {
    let dir = sample_tree();
    let options = PackOptions::default();
    let (mut first, mut second) = (Vec::new(), Vec::new());
    let one = pack(dir.path(), &mut first, &options).unwrap();
    // Touching files changes mtimes but not the tarball.
    std::fs::write(dir.path().join("a.txt"), "top\n").unwrap();
    let two = pack(dir.path(), &mut second, &options).unwrap();
    assert_eq!(first, second);
    assert_eq!(one, two);
    let entries = entries_of(&first);
    let run = entries.iter().find(|e| e.0 == "run.sh").unwrap();
    assert_eq!(run.2, 0o755);
}

#[test]
fn pack_applies_the_filter() {
    let dir = sample_tree();
    let filter = IgnoreFilter::from_patterns("a/b/\n*.txt\n", "test").unwrap();
    let mut out = Vec::new();
    pack(
        dir.path(),
        &mut out,
        &PackOptions {
            filter: Some(&filter),
            modes: ModePolicy::Preserve,
            limits: None,
        },
    )
    .unwrap();
    let names: Vec<String> = entries_of(&out).into_iter().map(|e| e.0).collect();
    assert_eq!(names, [".", "a", "a/x.yaml", "run.sh"]);
}

#[test]
fn pack_refuses_a_missing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let error = pack(
        &dir.path().join("nope"),
        Vec::new(),
        &PackOptions::default(),
    )
    .unwrap_err();
    assert!(error.to_string().contains("nope"), "{error}");
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let error = pack(
        &dir.path().join("file"),
        Vec::new(),
        &PackOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(error, Error::NotADirectory { .. }), "{error}");
}

#[test]
fn long_names_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let splittable = format!("{}/{}", "d".repeat(120), "f".repeat(90));
    let unsplittable = format!("e/{}", "g".repeat(180));
    std::fs::create_dir_all(dir.path().join("d".repeat(120))).unwrap();
    std::fs::create_dir_all(dir.path().join("e")).unwrap();
    std::fs::write(dir.path().join(&splittable), "one").unwrap();
    std::fs::write(dir.path().join(&unsplittable), "two").unwrap();
    let mut out = Vec::new();
    pack(dir.path(), &mut out, &PackOptions::default()).unwrap();
    let names: Vec<String> = entries_of(&out).into_iter().map(|e| e.0).collect();
    assert!(
        names.contains(&splittable) && names.contains(&unsplittable),
        "{names:?}"
    );
    let target = dir.path().join("out");
    extract(&out[..], &target, &Limits::default()).unwrap();
    assert_eq!(
        std::fs::read_to_string(target.join(&unsplittable)).unwrap(),
        "two"
    );
}

#[test]
fn pack_to_file_is_atomic_and_extracts_back() {
    let dir = sample_tree();
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("kind/ns/name/artifact.tar.gz");
    let packed = pack_to_file(dir.path(), &path, &PackOptions::default()).unwrap();
    assert_eq!(
        tree(store.path()),
        [
            "kind",
            "kind/ns",
            "kind/ns/name",
            "kind/ns/name/artifact.tar.gz"
        ]
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(packed.size, std::fs::metadata(&path).unwrap().len());

    let target = store.path().join("out");
    let summary = extract_file(&path, &target, &Limits::default()).unwrap();
    assert_eq!(
        tree(&target),
        ["a", "a.txt", "a/b", "a/b/y.yaml", "a/x.yaml", "run.sh"]
    );
    assert_eq!(
        std::fs::read_to_string(target.join("a/b/y.yaml")).unwrap(),
        "y: 2\n"
    );
    assert_eq!(
        std::fs::metadata(target.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    assert_eq!((summary.files, summary.directories), (4, 2));
}

#[test]
fn extract_into_an_empty_existing_directory_but_not_a_full_one() {
    let dir = sample_tree();
    let mut out = Vec::new();
    pack(dir.path(), &mut out, &PackOptions::default()).unwrap();
    let temp = tempfile::tempdir().unwrap();
    let target = temp.path().join("out");
    std::fs::create_dir(&target).unwrap();
    extract(&out[..], &target, &Limits::default()).unwrap();
    let error = extract(&out[..], &target, &Limits::default()).unwrap_err();
    assert!(matches!(error, Error::TargetNotEmpty { .. }), "{error}");
}

#[test]
fn refuses_parent_directory_names() {
    let tarball = raw_tarball(&[file("ok.yaml", b"ok"), file("../evil", b"evil")]);
    let error = refused(&tarball, &Limits::default());
    assert_eq!(
        error.to_string(),
        "tar entry \"../evil\": path escapes the target directory (`..`)"
    );
    let tarball = raw_tarball(&[file("a/../../evil", b"evil")]);
    assert!(matches!(
        refused(&tarball, &Limits::default()),
        Error::UnsafeEntry { .. }
    ));
}

#[test]
fn refuses_absolute_names() {
    let tarball = raw_tarball(&[file("/tmp/capstan-evil", b"evil")]);
    let error = refused(&tarball, &Limits::default());
    assert_eq!(
        error.to_string(),
        "tar entry \"/tmp/capstan-evil\": absolute path"
    );
    assert!(!Path::new("/tmp/capstan-evil").exists());
}

#[test]
fn refuses_symlinks_out_of_the_root() {
    let error = refused(
        &raw_tarball(&[symlink("up", "../outside")]),
        &Limits::default(),
    );
    assert!(
        error
            .to_string()
            .contains("points outside the target directory"),
        "{error}"
    );
    let error = refused(
        &raw_tarball(&[symlink("abs", "/etc/passwd")]),
        &Limits::default(),
    );
    assert!(error.to_string().contains("is absolute"), "{error}");
    // Each link looks harmless on its own; together `t` resolves to the parent of the root.
    let chain = raw_tarball(&[symlink("s", "."), symlink("t", "s/..")]);
    let error = refused(&chain, &Limits::default());
    assert_eq!(
        error.to_string(),
        "tar entry \"t\": symlink resolves outside the target directory"
    );
}

#[test]
fn refuses_writing_through_a_symlink() {
    let tarball = raw_tarball(&[symlink("dir", "."), file("dir/x", b"x")]);
    let error = refused(&tarball, &Limits::default());
    assert!(
        error.to_string().contains("goes through the symlink"),
        "{error}"
    );
}

#[test]
fn keeps_symlinks_inside_the_root() {
    let tarball = raw_tarball(&[
        file("a/real.yaml", b"real"),
        symlink("a/alias.yaml", "real.yaml"),
    ]);
    let temp = tempfile::tempdir().unwrap();
    let target = temp.path().join("out");
    let summary = extract(&tarball[..], &target, &Limits::default()).unwrap();
    assert_eq!(
        std::fs::read_to_string(target.join("a/alias.yaml")).unwrap(),
        "real"
    );
    assert_eq!(summary.symlinks, 1);
}

#[test]
fn hard_links_only_to_extracted_files() {
    let link = |name, target| Raw {
        name,
        kind: tar::EntryType::Link,
        link: target,
        data: b"",
    };
    let error = refused(
        &raw_tarball(&[link("h", "../../etc/passwd")]),
        &Limits::default(),
    );
    assert!(error.to_string().contains("hard link target"), "{error}");
    let error = refused(
        &raw_tarball(&[link("h", "/etc/passwd")]),
        &Limits::default(),
    );
    assert!(error.to_string().contains("hard link target"), "{error}");

    let temp = tempfile::tempdir().unwrap();
    let target = temp.path().join("out");
    extract(
        &raw_tarball(&[file("f", b"data"), link("h", "f")])[..],
        &target,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(std::fs::read_to_string(target.join("h")).unwrap(), "data");
}

#[test]
fn refuses_devices_and_fifos() {
    for kind in [
        tar::EntryType::Char,
        tar::EntryType::Block,
        tar::EntryType::Fifo,
    ] {
        let tarball = raw_tarball(&[Raw {
            name: "dev",
            kind,
            link: "",
            data: b"",
        }]);
        let error = refused(&tarball, &Limits::default());
        assert!(
            error
                .to_string()
                .starts_with("tar entry \"dev\": unsupported entry type"),
            "{error}"
        );
    }
}

#[test]
fn refuses_decompression_bombs() {
    let zeros = vec![0u8; 64 << 20];
    let tarball = raw_tarball(&[file("bomb", &zeros)]);
    assert!(
        tarball.len() < 200 << 10,
        "the bomb compresses well: {}",
        tarball.len()
    );
    let limits = Limits {
        max_file_bytes: u64::MAX,
        max_total_bytes: u64::MAX,
        ..Limits::default()
    };
    let error = refused(&tarball, &limits);
    assert!(
        error
            .to_string()
            .starts_with("tar entry \"bomb\": compression ratio")
            && error.to_string().contains("200"),
        "{error}"
    );
}

#[test]
fn refuses_oversize_files_and_totals() {
    let tarball = raw_tarball(&[file("small", b"12345"), file("big", &[7u8; 2048])]);
    let error = refused(
        &tarball,
        &Limits {
            max_file_bytes: 1024,
            ..Limits::default()
        },
    );
    assert_eq!(
        error.to_string(),
        "tar entry \"big\": file size 2048 exceeds the limit of 1024"
    );
    let error = refused(
        &tarball,
        &Limits {
            max_total_bytes: 2050,
            ..Limits::default()
        },
    );
    assert_eq!(
        error.to_string(),
        "tar entry \"big\": total size 2053 exceeds the limit of 2050"
    );
    let error = refused(
        &tarball,
        &Limits {
            max_entries: 1,
            ..Limits::default()
        },
    );
    assert_eq!(
        error.to_string(),
        "tar entry \"big\": entry count 2 exceeds the limit of 1"
    );
    let error = refused(
        &tarball,
        &Limits {
            max_archive_bytes: 10,
            ..Limits::default()
        },
    );
    assert!(
        error.to_string().contains("compressed archive size"),
        "{error}"
    );
}

#[test]
fn refuses_garbage_and_truncated_input() {
    let error = refused(b"definitely not gzip", &Limits::default());
    assert!(matches!(error, Error::InvalidArchive { .. }), "{error}");
    let tarball = raw_tarball(&[file("f", &[1u8; 4096])]);
    // Cut the compressed stream short.
    let error = refused(&tarball[..tarball.len() / 2], &Limits::default());
    assert!(matches!(error, Error::InvalidArchive { .. }), "{error}");
}

#[test]
fn later_duplicate_file_wins() {
    let tarball = raw_tarball(&[file("f", b"one"), file("f", b"two")]);
    let temp = tempfile::tempdir().unwrap();
    let target = temp.path().join("out");
    let summary = extract(&tarball[..], &target, &Limits::default()).unwrap();
    assert_eq!(std::fs::read_to_string(target.join("f")).unwrap(), "two");
    assert_eq!(summary.files, 1);
}

#[test]
fn gzip_output_is_stable_across_writers() {
    // A writer that splits writes into tiny chunks must not change the bytes.
    struct Trickle(Vec<u8>);
    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = buf.len().min(7);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let dir = sample_tree();
    let mut plain = Vec::new();
    let mut trickle = Trickle(Vec::new());
    pack(dir.path(), &mut plain, &PackOptions::default()).unwrap();
    pack(dir.path(), &mut trickle, &PackOptions::default()).unwrap();
    assert_eq!(plain, trickle.0);
}

#[test]
fn extracts_a_tarball_written_by_go() {
    // A Helm chart archive from the shared corpus, written by Go's archive/tar and compress/gzip.
    let fixture = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/helm/template-chart-with-template-lib-archive-dep/chart/charts/common-0.0.5.tgz"
    ));
    let temp = tempfile::tempdir().unwrap();
    let target = temp.path().join("chart");
    let summary = extract_file(fixture, &target, &Limits::default()).unwrap();
    assert!(summary.files > 1, "{summary:?}");
    let chart = std::fs::read_to_string(target.join("common/Chart.yaml")).unwrap();
    assert!(chart.contains("name: common"), "{chart}");
}

/// A reader counting the bytes taken from it.
struct Counted<R> {
    inner: R,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// A tarball (stored, not compressed: no ratio check can fire) whose first member is an
/// extension record of `kind` and `size` bytes of `b'a'`, followed by a file.
fn extension_tarball(kind: u8, size: usize) -> Vec<u8> {
    let mut tar = Vec::new();
    let mut header = tar::Header::new_gnu();
    header.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    header.set_size(size as u64);
    header.set_entry_type(tar::EntryType::new(kind));
    header.set_cksum();
    tar.extend_from_slice(header.as_bytes());
    tar.resize(tar.len() + size.div_ceil(512) * 512, b'a');
    let mut builder = tar::Builder::new(tar);
    let mut file = tar::Header::new_gnu();
    file.set_size(2);
    file.set_mode(0o644);
    builder
        .append_data(&mut file, "ok.yaml", &b"a\n"[..])
        .unwrap();
    let tar = builder.into_inner().unwrap();
    let mut encoder = GzEncoder::new(Vec::new(), Compression::none());
    encoder.write_all(&tar).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn extension_records_are_refused_from_their_header_before_they_are_read() {
    for (kind, what) in [
        (b'L', "GNU long name record of 67108864 bytes"),
        (b'K', "GNU long link name record of 67108864 bytes"),
        (b'x', "PAX extended header record of 67108864 bytes"),
        (b'g', "PAX global header record of 67108864 bytes"),
    ] {
        let tarball = extension_tarball(kind, 64 << 20);
        let read = std::rc::Rc::default();
        let reader = Counted {
            inner: &tarball[..],
            read: std::rc::Rc::clone(&read),
        };
        let out = tempfile::tempdir().unwrap();
        let target = out.path().join("x");
        let error = extract(reader, &target, &Limits::default()).unwrap_err();
        assert!(
            matches!(&error, Error::LimitExceeded { what: w, limit, .. }
                if w == what && *limit == Limits::MAX_EXTENSION_BYTES),
            "{}: {error}",
            kind as char
        );
        assert!(
            read.get() < 4 << 20,
            "{}: stopped early, read {} bytes",
            kind as char,
            read.get()
        );
        assert!(!target.exists());
        assert_eq!(
            std::fs::read_dir(out.path()).unwrap().count(),
            0,
            "no leftovers"
        );
    }
}

#[test]
fn extension_records_within_the_limit_still_work() {
    // A PAX record for a long name, as pack writes it, and a small GNU long name.
    let dir = tempfile::tempdir().unwrap();
    let long = "d/".repeat(120) + "file.yaml";
    std::fs::create_dir_all(dir.path().join(long.rsplit_once('/').unwrap().0)).unwrap();
    std::fs::write(dir.path().join(&long), "a: 1\n").unwrap();
    let mut tarball = Vec::new();
    pack(dir.path(), &mut tarball, &PackOptions::default()).unwrap();
    let out = tempfile::tempdir().unwrap();
    extract(&tarball[..], &out.path().join("x"), &Limits::default()).unwrap();
    assert!(out.path().join("x").join(&long).is_file());

    let tarball = extension_tarball(b'L', 200);
    let out = tempfile::tempdir().unwrap();
    // The 200-byte name of `a`s names the file that follows.
    extract(&tarball[..], &out.path().join("x"), &Limits::default()).unwrap();
}

#[test]
fn a_pax_size_that_disagrees_with_the_header_cannot_hide_a_record() {
    // The PAX record says the next entry (a directory) has 0 bytes; its header says 512. The
    // `tar` crate follows the PAX size, so the guard must too: the oversize `L` header right
    // after the entry is seen and refused, not skipped as the directory's data.
    let mut tar = Vec::new();
    let record = b"10 size=0\n";
    let mut pax = tar::Header::new_ustar();
    pax.set_size(10);
    pax.set_entry_type(tar::EntryType::XHeader);
    pax.set_cksum();
    tar.extend_from_slice(pax.as_bytes());
    let mut data = record[..10].to_vec();
    data.resize(512, 0);
    tar.extend_from_slice(&data);
    let mut directory = tar::Header::new_gnu();
    directory.as_old_mut().name[..2].copy_from_slice(b"d/");
    directory.set_size(512);
    directory.set_mode(0o755);
    directory.set_entry_type(tar::EntryType::Directory);
    directory.set_cksum();
    tar.extend_from_slice(directory.as_bytes());
    let mut long = tar::Header::new_gnu();
    long.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    long.set_size(64 << 20);
    long.set_entry_type(tar::EntryType::GNULongName);
    long.set_cksum();
    tar.extend_from_slice(long.as_bytes());
    tar.resize(tar.len() + (64 << 20), b'a');
    let mut encoder = GzEncoder::new(Vec::new(), Compression::none());
    encoder.write_all(&tar).unwrap();
    let tarball = encoder.finish().unwrap();
    let out = tempfile::tempdir().unwrap();
    let error = extract(&tarball[..], &out.path().join("x"), &Limits::default()).unwrap_err();
    assert!(
        error.to_string().contains("GNU long name record"),
        "{error}"
    );
}

#[test]
fn pack_refuses_what_extraction_would_refuse_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), "a: 1\n").unwrap();
    std::fs::write(dir.path().join("big.bin"), vec![0u8; 4096]).unwrap();
    std::fs::write(dir.path().join("c.yaml"), "c: 1\n").unwrap();
    let pack_with = |limits: Limits| {
        pack(
            dir.path(),
            std::io::sink(),
            &PackOptions {
                limits: Some(&limits),
                ..PackOptions::default()
            },
        )
    };
    let limits = Limits {
        max_file_bytes: 4095,
        ..Limits::default()
    };
    let error = pack_with(limits).unwrap_err();
    assert_eq!(
        error.to_string(),
        "tar entry \"big.bin\": file size 4096 exceeds the limit of 4095"
    );
    // The root, three files: four entries.
    let limits = Limits {
        max_entries: 3,
        ..Limits::default()
    };
    let error = pack_with(limits).unwrap_err();
    assert_eq!(
        error.to_string(),
        "tar entry \"c.yaml\": entry count 4 exceeds the limit of 3"
    );
    let limits = Limits {
        max_entries: 4,
        ..Limits::default()
    };
    let mut tarball = Vec::new();
    pack(
        dir.path(),
        &mut tarball,
        &PackOptions {
            limits: Some(&limits),
            ..PackOptions::default()
        },
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    extract(&tarball[..], &out.path().join("x"), &limits).unwrap();
}

#[test]
fn stored_artifacts_are_read_without_the_ratio_check() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("zeros"), vec![0u8; 8 << 20]).unwrap();
    let mut tarball = Vec::new();
    let limits = Limits::default();
    pack(
        dir.path(),
        &mut tarball,
        &PackOptions {
            limits: Some(&limits),
            ..PackOptions::default()
        },
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let error = extract(&tarball[..], &out.path().join("x"), &limits).unwrap_err();
    assert!(error.to_string().contains("compression ratio"), "{error}");
    extract(
        &tarball[..],
        &out.path().join("y"),
        &limits.for_stored_artifacts(),
    )
    .unwrap();
}
