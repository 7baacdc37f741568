//! A real ZooKeeper server for tests: the installed Debian package (`zookeeper`, 3.8),
//! started with `java` on a free 127.0.0.1 port with a throwaway data directory, killed on
//! drop, and restartable on the same port and data for restart tests; and [`ZkEnsemble`],
//! three such servers in one quorum on loopback ports, for failover tests (kill, freeze
//! with SIGSTOP, restart, find the leader and the server a session is connected to).
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
    /// The `server.N=...` lines of its ensemble and its id (none: standalone).
    quorum: Option<(String, usize)>,
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
            quorum: None,
        };
        zk.write_config();
        zk.resume();
        zk
    }

    fn write_config(&self) {
        let mut cfg = format!(
            "tickTime=200\n\
             dataDir={}\n\
             clientPort={}\n\
             clientPortAddress=127.0.0.1\n\
             minSessionTimeout=1000\n\
             maxSessionTimeout=30000\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=ruok,srvr,cons\n\
             maxClientCnxns=100\n",
            self.dir.join("data").display(),
            self.port
        );
        if let Some((servers, id)) = &self.quorum {
            cfg.push_str("initLimit=20\nsyncLimit=5\n");
            cfg.push_str(servers);
            std::fs::write(self.dir.join("data").join("myid"), format!("{id}\n"))
                .expect("write myid");
        }
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
        self.resume_in_background();
        self.wait_serving();
    }

    /// Starts the process again without waiting for it to serve (an ensemble's members
    /// serve only once a quorum is up: start them all, then wait for each).
    pub fn resume_in_background(&mut self) {
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
                if self.quorum.is_some() {
                    "org.apache.zookeeper.server.quorum.QuorumPeerMain"
                } else {
                    "org.apache.zookeeper.server.ZooKeeperServerMain"
                },
            ])
            .arg(self.dir.join("zoo.cfg"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("spawn java for ZooKeeper");
        self.child = Some(child);
    }

    /// Waits until the server serves requests; panics with its log if it exits.
    fn wait_serving(&mut self) {
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

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&self, name: &str) {
        let pid = self.pid().expect("ZooKeeper is not running");
        let status = Command::new("kill")
            .args([&format!("-{name}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {pid} failed");
    }

    /// Freezes the process (SIGSTOP): its port accepts connections, nothing answers.
    pub fn freeze(&self) {
        self.signal("STOP");
    }

    /// Lets a frozen process go on (SIGCONT).
    pub fn thaw(&self) {
        self.signal("CONT");
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
            // A frozen server must be let go on before it can die.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Three ZooKeeper servers in one quorum on loopback ports (each a [`ZooKeeper`]), started
/// together; each can be killed, frozen, thawed and restarted on its own.
pub struct ZkEnsemble {
    /// The servers, by index (server id = index + 1).
    pub servers: Vec<ZooKeeper>,
}

impl ZkEnsemble {
    /// Starts `n` servers as one ensemble and waits until every one serves.
    pub fn start(name: &str, n: usize) -> Self {
        assert!(
            Path::new(ZOOKEEPER_JAR).exists(),
            "ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): run `bash .ci/zookeeper.sh` \
             (apt-get install -y zookeeper)"
        );
        // Each server: a client port, a quorum port and an election port.
        let ports: Vec<(u16, u16, u16)> = (0..n)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let lines: String = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer, election))| {
                format!("server.{}=127.0.0.1:{peer}:{election}\n", i + 1)
            })
            .collect();
        let mut servers: Vec<ZooKeeper> = ports
            .iter()
            .enumerate()
            .map(|(i, (client, _, _))| {
                let dir = std::env::temp_dir().join(format!(
                    "routechain-zk-{name}-{}-{}-{i}",
                    std::process::id(),
                    client
                ));
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(dir.join("data"))
                    .expect("create the ZooKeeper data directory");
                let zk = ZooKeeper {
                    dir,
                    port: *client,
                    child: None,
                    quorum: Some((lines.clone(), i + 1)),
                };
                zk.write_config();
                zk
            })
            .collect();
        for zk in &mut servers {
            zk.resume_in_background();
        }
        for zk in &mut servers {
            zk.wait_serving();
        }
        ZkEnsemble { servers }
    }

    /// The connection string of every server.
    pub fn address(&self) -> String {
        let all: Vec<String> = self.servers.iter().map(ZooKeeper::address).collect();
        all.join(",")
    }

    /// The index of the leader (waits up to 30 s for one).
    pub fn leader(&self) -> usize {
        let start = Instant::now();
        loop {
            if let Some(i) = self.servers.iter().position(|zk| {
                zk.child.is_some() && zk.four_letters("srvr").contains("Mode: leader")
            }) {
                return i;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no ZooKeeper leader within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The index of the running server that holds session `session` (as written by the
    /// client, `0x...`), if any answers for it.
    pub fn serving(&self, session: &str) -> Option<usize> {
        let sid = format!("sid={session}");
        self.servers
            .iter()
            .position(|zk| zk.child.is_some() && zk.four_letters("cons").contains(&sid))
    }

    /// Waits until server `i` serves again (after [`ZooKeeper::resume`]'s spawn, or a thaw).
    pub fn wait_serving(&mut self, i: usize) {
        self.servers[i].wait_serving();
    }
}
