//! The test "internet" of allowlist mode (issue #15), served in the private
//! site network of [`super::lan`]: a certificate authority and a server
//! certificate made for each test with the openssl CLI, a directory of
//! files and a git repository ("dumb HTTP": a bare repository after
//! `git update-server-info`) served by `netprobe.py web` over HTTP and TLS,
//! and `netprobe.py dns` answering the test names. Everything, the keys
//! included, lives in a [`TestDir`] that goes with the test: no key material
//! is ever in the repository.
//!
//! | name            | resolves to                         | serves                |
//! |-----------------|-------------------------------------|-----------------------|
//! | `allowed.test`  | 203.0.113.10 (the "internet")       | [`INDEX`], `/blob`, `/repo.git`, `/trickle`; `/smart/org/repo.git` (smart HTTP, push too, token needed) |
//! | `denied.test`   | 203.0.113.10                        | the same              |
//! | `internal.test` | 10.77.0.9 (the LAN host)            | [`INTERNAL_INDEX`]    |
//!
//! Every other name resolves to the internet host too; with
//! [`Site::start_echo`] it also answers on port [`ECHO_PORT`] with what
//! reached it (`netprobe.py echo`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::lan::Lan;
use super::{stderr, TestDir, Who, World, TEST_UID};

/// `/` of the internet host.
pub(crate) const INDEX: &str = "allowed.test: the test internet\n";
/// `/` of the LAN host (must never arrive inside the sandbox).
pub(crate) const INTERNAL_INDEX: &str = "internal.test: the LAN host\n";
/// The size of `/blob`.
pub(crate) const BLOB_LEN: usize = 100_000;
/// `README` in the served repository.
pub(crate) const README: &str = "cloned through the proxy\n";
/// The resolver's address (the gateway).
pub(crate) const RESOLVER: &str = "10.77.0.1";
/// The internet host's port where `netprobe.py echo` answers.
pub(crate) const ECHO_PORT: u16 = 8080;
/// How long the site's listeners live (seconds).
const LIFETIME: &str = "120";

/// `/blob`: BLOB_LEN bytes that compress badly (so no layer can shrink them).
pub(crate) fn blob() -> Vec<u8> {
    let mut x: u32 = 0x2545_f491;
    (0..BLOB_LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// One site: its files, certificates and repository.
pub(crate) struct Site {
    pub(crate) dir: TestDir,
}

fn run(what: &str, cmd: &mut Command) {
    let o = cmd
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(o.status.success(), "{what}: {}", stderr(&o));
}

fn openssl(dir: &Path, args: &[&str]) {
    run(
        &format!("openssl {}", args.join(" ")),
        Command::new("openssl").current_dir(dir).args(args),
    );
}

impl Site {
    pub(crate) fn new(name: &str) -> Site {
        let site = Site {
            dir: TestDir::new("site", name),
        };
        let d = site.dir.to_path_buf();
        let www = d.join("www");
        let internal = d.join("internal");
        std::fs::create_dir_all(&www).unwrap();
        std::fs::create_dir_all(&internal).unwrap();
        std::fs::write(www.join("index.html"), INDEX).unwrap();
        std::fs::write(www.join("blob"), blob()).unwrap();
        std::fs::write(internal.join("index.html"), INTERNAL_INDEX).unwrap();
        // The CA, then a server certificate for every test name it signs.
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = vec!["req", "-x509"];
        ca.extend(ec);
        ca.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=claude-sandbox test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(&d, &ca);
        let mut csr = vec!["req"];
        csr.extend(ec);
        csr.extend([
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=allowed.test",
        ]);
        openssl(&d, &csr);
        std::fs::write(
            d.join("server.ext"),
            "subjectAltName = DNS:allowed.test, DNS:denied.test, DNS:internal.test, DNS:github.com, DNS:api.github.com, DNS:api.anthropic.com, DNS:gitlab.com, DNS:gitlab.example.test, DNS:ghe.example.test, DNS:console.anthropic.com, DNS:platform.claude.com, DNS:claude.ai\n\
             basicConstraints = CA:FALSE\n\
             keyUsage = critical, digitalSignature\n\
             extendedKeyUsage = serverAuth\n",
        )
        .unwrap();
        openssl(
            &d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-set_serial",
                "1",
                "-days",
                "2",
                "-extfile",
                "server.ext",
                "-out",
                "server.pem",
            ],
        );
        // Readable by all, like everything else of the site: a root launch
        // masks every file under /var that others cannot read, and a test
        // ending meanwhile would remove one from under the mask.
        for key in ["ca.key", "server.key"] {
            std::fs::set_permissions(d.join(key), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        // The repository: one commit, pushed to a bare one made servable
        // as static files.
        let src = d.join("src");
        let bare = www.join("repo.git");
        run(
            "git init",
            Command::new("git")
                .args(["init", "-q", "-b", "main"])
                .arg(&src),
        );
        std::fs::write(src.join("README"), README).unwrap();
        run(
            "git add",
            Command::new("git")
                .arg("-C")
                .arg(&src)
                .args(["add", "README"]),
        );
        run(
            "git commit",
            Command::new("git").arg("-C").arg(&src).args([
                "-c",
                "user.name=Test",
                "-c",
                "user.email=test@example.test",
                "commit",
                "-q",
                "-m",
                "the only commit",
            ]),
        );
        run(
            "git clone --bare",
            Command::new("git")
                .args(["clone", "-q", "--bare"])
                .arg(&src)
                .arg(&bare),
        );
        run(
            "git update-server-info",
            Command::new("git")
                .arg("-C")
                .arg(&bare)
                .arg("update-server-info"),
        );
        // The same repository where an ssh-style GitHub remote leads once
        // the sandbox's git config rewrites it to https (github.com, too,
        // resolves to the test internet host).
        std::fs::create_dir_all(www.join("org")).unwrap();
        run(
            "cp -r",
            Command::new("cp")
                .arg("-r")
                .arg(&bare)
                .arg(www.join("org/repo.git")),
        );
        site
    }

    /// The CA certificate (public part only).
    pub(crate) fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// Start the resolver and the web servers in `lan`, and wait until they
    /// listen: `internal.test` resolves to the LAN host, every other name to
    /// the internet host; both serve HTTP on 80 and TLS on 443.
    pub(crate) fn start(&self, lan: &mut Lan) {
        let l = lan.lan.clone();
        let d = self.dir.display().to_string();
        lan.listen(&l, &["dns", RESOLVER, LIFETIME, "internal.test=10.77.0.9"]);
        let (cert, key) = (format!("{d}/server.pem"), format!("{d}/server.key"));
        for (addr, root) in [("203.0.113.10", "www"), ("10.77.0.9", "internal")] {
            let root = format!("{d}/{root}");
            lan.listen(&l, &["web", &format!("{addr}:80"), &root, LIFETIME]);
            lan.listen(
                &l,
                &[
                    "web",
                    &format!("{addr}:443"),
                    &root,
                    LIFETIME,
                    "--tls",
                    &cert,
                    &key,
                ],
            );
        }
        lan.wait_listening(
            &l,
            &[
                "203.0.113.10:80",
                "203.0.113.10:443",
                "10.77.0.9:80",
                "10.77.0.9:443",
            ],
            &[&format!("{RESOLVER}:53")],
        );
    }

    /// Copy the CA certificate into `who`'s workspace (visible inside the
    /// sandbox at the same path); its path.
    pub(crate) fn ca_into(&self, w: &World, who: Who) -> PathBuf {
        let p = w.workspace(who).join("ca.pem");
        std::fs::copy(self.ca(), &p).unwrap();
        if who == Who::User {
            std::os::unix::fs::chown(&p, Some(TEST_UID), Some(TEST_UID)).unwrap();
        }
        p
    }
}

impl Site {
    /// Start `netprobe.py echo` on the internet host's [`ECHO_PORT`] (an
    /// HTTP/1.1 peer answering each request with what reached it), and
    /// wait until it listens.
    pub(crate) fn start_echo(&self, lan: &mut Lan) {
        let l = lan.lan.clone();
        let at = format!("203.0.113.10:{ECHO_PORT}");
        lan.listen(&l, &["echo", &at, LIFETIME]);
        lan.wait_listening(&l, &[&at], &[]);
    }
}
