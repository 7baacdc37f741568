//! A real ZooKeeper server for tests: the installed Debian package (`zookeeper`, 3.8),
//! started with `java` on a free 127.0.0.1 port with a throwaway data directory, killed on
//! drop, and restartable on the same port and data for restart tests.
//!
//! A missing ZooKeeper or Java is a test failure with the install command, never a skip
//! (`bash .ci/zookeeper.sh` installs it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server jar of the Debian package; its manifest's class path names the other jars.
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";

/// A running (or stopped) ZooKeeper server owned by one test.
pub struct ZooKeeper {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free loopback port")
}

impl ZooKeeper {
    /// Starts a server and waits until it answers `ruok`.
    pub fn start(name: &str) -> Self {
        assert!(
            Path::new(ZOOKEEPER_JAR).exists(),
            "ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): run `bash .ci/zookeeper.sh` \
             (apt-get install -y zookeeper)"
        );
        let dir = std::env::temp_dir().join(format!(
            "routechain-zk-{name}-{}-{}",
            std::process::id(),
            free_port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).expect("create the ZooKeeper data directory");
        let mut zk = ZooKeeper {
            dir,
            port: free_port(),
            child: None,
        };
        zk.write_config();
        zk.resume();
        zk
    }

    fn write_config(&self) {
        let cfg = format!(
            "tickTime=200\n\
             dataDir={}\n\
             clientPort={}\n\
             clientPortAddress=127.0.0.1\n\
             minSessionTimeout=1000\n\
             maxSessionTimeout=30000\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=ruok,srvr\n\
             maxClientCnxns=100\n",
            self.dir.join("data").display(),
            self.port
        );
        std::fs::write(self.dir.join("zoo.cfg"), cfg).expect("write zoo.cfg");
    }

    /// `127.0.0.1:<port>`, the connection string.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Kills the server (data kept) and waits until the port refuses connections.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "ZooKeeper still answers after kill"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server again on the same port with the same data, and waits until it
    /// answers.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "ZooKeeper is already running");
        let which_java = Command::new("java").arg("-version").output();
        assert!(
            which_java.is_ok(),
            "java is not installed: run `bash .ci/zookeeper.sh` (apt-get install -y zookeeper)"
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .expect("open the server log");
        let child = Command::new("java")
            .args([
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Dzookeeper.admin.enableServer=false",
                "-cp",
                ZOOKEEPER_JAR,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
            ])
            .arg(self.dir.join("zoo.cfg"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("spawn java for ZooKeeper");
        self.child = Some(child);
        let start = Instant::now();
        loop {
            if self.ruok() {
                return;
            }
            if !self.is_running() {
                let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
                panic!("ZooKeeper exited during start-up:\n{log}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "ZooKeeper did not answer on {} within 60 s",
                self.address()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops and starts the server (same port, same data).
    pub fn restart(&mut self) {
        self.stop();
        self.resume();
    }

    /// True when the server answers `ruok` and serves requests (`srvr` shows its mode;
    /// a server still loading its data answers `ruok` but refuses sessions).
    fn ruok(&self) -> bool {
        self.four_letters("ruok") == "imok" && self.four_letters("srvr").contains("Mode:")
    }

    fn four_letters(&self, word: &str) -> String {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return String::new();
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(word.as_bytes()).is_err() {
            return String::new();
        }
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
    }
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
