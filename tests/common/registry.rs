//! A local OCI registry for the release rehearsal (tests/release.rs):
//! Debian's `docker-registry` (the CNCF distribution registry), its storage
//! in a [`TestDir`], served at `localhost:5000` inside a network namespace
//! the test made (an engine's), where the devcontainer CLI that publishes
//! and consumes the feature runs. The CLI speaks plain HTTP to a registry
//! named `localhost[:PORT]` (decision 0035). One storage can be served in
//! several namespaces at once (each engine's), so every engine gets the
//! very bytes published once. Each [`Serving`] is killed when dropped.

use super::{stderr, stdout, TestDir};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Where the registry answers, inside the namespace it serves in.
pub(crate) const ADDR: &str = "localhost:5000";
/// The registry binary (Debian's docker-registry package).
pub(crate) const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

pub(crate) struct Registry {
    pub(crate) dir: TestDir,
}

/// One registry process, serving the storage in one network namespace.
pub(crate) struct Serving {
    child: Child,
    netns: PathBuf,
}

impl Registry {
    /// Empty storage and its configuration: filesystem storage, no auth,
    /// listening on port 5000 of whatever namespace it runs in.
    pub(crate) fn new() -> Registry {
        let dir = TestDir::new("registry", "oci");
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(
            dir.join("config.yml"),
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}/data\n\
                 http:\n  addr: :5000\n",
                dir.display()
            ),
        )
        .unwrap();
        Registry { dir }
    }

    /// The registry serving in the network namespace `netns` (a
    /// /proc/PID/ns/net path), once `/v2/` answers there (at most 30 s).
    pub(crate) fn serve(&self, netns: &Path) -> Serving {
        let log = std::fs::File::create(self.dir.join("registry.log")).unwrap();
        // nsenter (network only) execs the registry: the child is it.
        let child = Command::new("nsenter")
            .arg(format!("--net={}", netns.display()))
            .args([REGISTRY_BIN, "serve"])
            .arg(self.dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let s = Serving {
            child,
            netns: netns.to_path_buf(),
        };
        let t0 = Instant::now();
        while !s.get("/v2/", &[]).status.success() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the registry did not come up: {}",
                std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        s
    }
}

impl Serving {
    /// `curl` GET of `path` on the registry, in its namespace, with extra
    /// curl arguments `args`.
    pub(crate) fn get(&self, path: &str, args: &[&str]) -> Output {
        Command::new("nsenter")
            .arg(format!("--net={}", self.netns.display()))
            .args(["curl", "-sSf", "--max-time", "20"])
            .args(args)
            .arg(format!("http://{ADDR}{path}"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The tags of repository `repo` (NAMESPACE/ID), sorted.
    pub(crate) fn tags(&self, repo: &str) -> Vec<String> {
        let o = self.get(&format!("/v2/{repo}/tags/list"), &[]);
        assert!(o.status.success(), "tags of {repo}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let mut tags: Vec<String> = v["tags"]
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .filter_map(|t| t.as_str().map(String::from))
            .collect();
        tags.sort();
        tags
    }

    /// The manifest of `repo` at `reference` (a tag or a digest) and its
    /// digest (`sha256:…`, the registry's Docker-Content-Digest).
    pub(crate) fn manifest(&self, repo: &str, reference: &str) -> (serde_json::Value, String) {
        let accept = "Accept: application/vnd.oci.image.manifest.v1+json";
        let o = self.get(
            &format!("/v2/{repo}/manifests/{reference}"),
            &["-D", "-", "-H", accept],
        );
        assert!(
            o.status.success(),
            "manifest {repo}:{reference}: {}",
            stderr(&o)
        );
        let text = stdout(&o);
        let (head, body) = text.split_once("\r\n\r\n").expect("headers, then the body");
        let digest = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("docker-content-digest")
                    .then(|| v.trim().to_string())
            })
            .expect("Docker-Content-Digest");
        (serde_json::from_str(body).unwrap(), digest)
    }

    /// The feature's tarball (the manifest's one layer) of `repo` at
    /// `reference`, unpacked into `into`.
    pub(crate) fn unpack(&self, repo: &str, reference: &str, into: &Path) {
        let (manifest, _) = self.manifest(repo, reference);
        let layers = manifest["layers"].as_array().expect("layers");
        assert_eq!(layers.len(), 1, "{manifest}");
        let blob = layers[0]["digest"].as_str().unwrap();
        let tar = into.with_extension("tar");
        let out = tar.display().to_string();
        let o = self.get(&format!("/v2/{repo}/blobs/{blob}"), &["-L", "-o", &out]);
        assert!(o.status.success(), "blob {blob}: {}", stderr(&o));
        std::fs::create_dir_all(into).unwrap();
        let o = Command::new("tar")
            .arg("-xf")
            .arg(&tar)
            .arg("-C")
            .arg(into)
            .output()
            .unwrap();
        assert!(o.status.success(), "tar -xf {out}: {}", stderr(&o));
        std::fs::remove_file(&tar).unwrap();
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
