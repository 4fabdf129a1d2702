//! The three containers, read into one [`Bag`]: its topics and the messages of the kinds gst reads.
//!
//! - a plain **MCAP** file (`mcap` crate, chunk CRCs checked), ROS 2 CDR messages (or ROS 1 messages,
//!   channel encoding `ros1`);
//! - a **rosbag2** folder: `metadata.yaml` naming its `.mcap` files (storage `mcap`; the sqlite3 storage is
//!   refused with a message saying how to convert);
//! - a **ROS 1** `.bag` file (`rosbag` crate: uncompressed, bz2 and lz4 chunks).
//!
//! The files are read into memory once; the messages gst reads are kept as ranges of those bytes (or as
//! their own bytes where a chunk was compressed), and decoded only when a frame is asked for.

use std::ops::Range;
use std::path::{Path, PathBuf};

use gst_io::IoError;

use crate::msg::{MessageKind, Wire};

/// Which container a bag is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BagFormat {
    Mcap,
    Rosbag2,
    Ros1,
}

impl std::fmt::Display for BagFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Mcap => "MCAP file",
            Self::Rosbag2 => "rosbag2 folder",
            Self::Ros1 => "ROS 1 bag",
        })
    }
}

/// One topic of a bag.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicInfo {
    pub name: String,
    /// The type as the bag names it (`sensor_msgs/msg/Image` or `sensor_msgs/Image`).
    pub type_name: String,
    /// The kind gst reads it as; `None` for types gst ignores.
    pub kind: Option<MessageKind>,
    pub wire: Wire,
    /// Messages on the topic.
    pub count: usize,
    /// Record (log) times of the first and last message, nanoseconds.
    pub first_log_ns: Option<u64>,
    pub last_log_ns: Option<u64>,
}

impl TopicInfo {
    /// Messages per second over the topic's log-time span (`None` with fewer than two messages).
    pub fn rate_hz(&self) -> Option<f64> {
        let (first, last) = (self.first_log_ns?, self.last_log_ns?);
        (self.count >= 2 && last > first).then(|| (self.count - 1) as f64 / ((last - first) as f64 * 1e-9))
    }
}

/// Where a message's bytes are.
#[derive(Clone, Debug)]
enum Payload {
    /// A range of one of the bag's files.
    Slice { file: usize, range: Range<usize> },
    /// Bytes of their own (from a compressed chunk).
    Owned(Vec<u8>),
}

/// A message of a kind gst reads.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub topic: usize,
    /// Position on its topic, counting from 0 (what errors call the message index).
    pub index: usize,
    payload: Payload,
}

/// A recording opened: its files' bytes, topics and the messages of known kinds in file order.
#[derive(Debug)]
pub struct Bag {
    path: PathBuf,
    format: BagFormat,
    files: Vec<(PathBuf, Vec<u8>)>,
    topics: Vec<TopicInfo>,
    records: Vec<Record>,
}

fn error(path: &Path, message: String) -> IoError {
    IoError::Source { path: path.into(), message }
}

impl Bag {
    /// Opens a `.mcap` file, a rosbag2 folder or a `.bag` file (told by content, not extension).
    pub fn open(path: &Path) -> Result<Self, IoError> {
        if path.is_dir() {
            return Self::open_rosbag2(path);
        }
        let bytes = std::fs::read(path).map_err(|source| IoError::Io { path: path.into(), source })?;
        if bytes.starts_with(MCAP_MAGIC) {
            let mut bag = Self::empty(path, BagFormat::Mcap);
            bag.add_mcap(path, bytes)?;
            Ok(bag)
        } else if bytes.starts_with(ROS1_MAGIC) {
            drop(bytes);
            Self::open_ros1(path)
        } else if bytes.starts_with(b"SQLite format 3") {
            Err(error(path, SQLITE_MESSAGE.into()))
        } else {
            Err(error(
                path,
                "is neither an MCAP file (magic \\x89MCAP0\\r\\n) nor a ROS 1 bag (#ROSBAG V2.0) nor a rosbag2 \
                 folder"
                    .into(),
            ))
        }
    }

    /// Whether `path` looks like a bag (by extension, or a folder with `metadata.yaml`), for dispatch.
    pub fn looks_like_bag(path: &Path) -> bool {
        if path.is_dir() {
            return path.join("metadata.yaml").is_file();
        }
        path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
            e.eq_ignore_ascii_case("mcap") || e.eq_ignore_ascii_case("bag") || e.eq_ignore_ascii_case("db3")
        })
    }

    fn empty(path: &Path, format: BagFormat) -> Self {
        Self { path: path.into(), format, files: Vec::new(), topics: Vec::new(), records: Vec::new() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn format(&self) -> BagFormat {
        self.format
    }

    pub fn topics(&self) -> &[TopicInfo] {
        &self.topics
    }

    pub(crate) fn records(&self) -> &[Record] {
        &self.records
    }

    /// The file a record is in (for messages), and its bytes.
    pub(crate) fn payload<'s>(&'s self, record: &'s Record) -> (&'s Path, &'s [u8]) {
        match &record.payload {
            Payload::Slice { file, range } => {
                let (path, bytes) = &self.files[*file];
                (path, bytes.get(range.clone()).unwrap_or(&[]))
            }
            Payload::Owned(bytes) => (&self.path, bytes),
        }
    }

    /// The index of a topic, adding it on first sight.
    fn topic_index(&mut self, name: &str, type_name: &str, wire: Wire) -> usize {
        if let Some(i) = self.topics.iter().position(|t| t.name == name) {
            return i;
        }
        self.topics.push(TopicInfo {
            name: name.into(),
            type_name: type_name.into(),
            kind: MessageKind::from_type(type_name),
            wire,
            count: 0,
            first_log_ns: None,
            last_log_ns: None,
        });
        self.topics.len() - 1
    }

    /// Counts a message on a topic and keeps it when gst reads its kind.
    fn push(&mut self, topic: usize, log_time_ns: u64, payload: impl FnOnce() -> Payload) {
        let info = &mut self.topics[topic];
        let index = info.count;
        info.count += 1;
        info.first_log_ns = Some(info.first_log_ns.map_or(log_time_ns, |t| t.min(log_time_ns)));
        info.last_log_ns = Some(info.last_log_ns.map_or(log_time_ns, |t| t.max(log_time_ns)));
        if info.kind.is_some() {
            self.records.push(Record { topic, index, payload: payload() });
        }
    }

    fn add_mcap(&mut self, path: &Path, bytes: Vec<u8>) -> Result<(), IoError> {
        let file = self.files.len();
        let mut pending: Vec<Pending> = Vec::new();
        // Channels from the summary first, so that topics without messages are listed too (a damaged file
        // without a readable summary is reported by the message stream below).
        if let Ok(Some(summary)) = mcap::Summary::read(&bytes) {
            let mut channels: Vec<_> = summary.channels.values().collect();
            channels.sort_by_key(|c| c.id);
            for channel in channels {
                let type_name = channel.schema.as_ref().map_or("", |s| s.name.as_str());
                let wire = if channel.message_encoding == "ros1" { Wire::Ros1 } else { Wire::Cdr };
                self.topic_index(&channel.topic, type_name, wire);
            }
        }
        {
            let base = bytes.as_ptr() as usize;
            let end = base + bytes.len();
            let mut stream = mcap::read::RawMessageStream::new(&bytes)
                .map_err(|e| error(path, format!("is not a readable MCAP file: {e}")))?;
            let mut count = 0usize;
            while let Some(item) = stream.next() {
                let message = item.map_err(|e| {
                    error(
                        path,
                        format!(
                            "is damaged after {count} messages: {e}{}",
                            if matches!(e, mcap::McapError::BadChunkCrc { .. }) {
                                " (a chunk's CRC does not match its bytes)"
                            } else {
                                ""
                            }
                        ),
                    )
                })?;
                count += 1;
                let Some(channel) = stream.get_channel(message.header.channel_id) else {
                    return Err(error(
                        path,
                        format!(
                            "message {count} is on channel {} that was never declared",
                            message.header.channel_id
                        ),
                    ));
                };
                let type_name = channel.schema.as_ref().map_or("", |s| s.name.as_str());
                let wire = match channel.message_encoding.as_str() {
                    "ros1" => Wire::Ros1,
                    _ => Wire::Cdr,
                };
                if MessageKind::from_type(type_name).is_some()
                    && !matches!(channel.message_encoding.as_str(), "cdr" | "ros1")
                {
                    return Err(error(
                        path,
                        format!(
                            "topic {} ({type_name}) has message encoding {:?}; gst reads cdr (ROS 2) and ros1",
                            channel.topic, channel.message_encoding
                        ),
                    ));
                }
                let topic = self.topic_index(&channel.topic, type_name, wire);
                let data: Result<Range<usize>, Vec<u8>> = match &message.data {
                    std::borrow::Cow::Borrowed(slice)
                        if slice.as_ptr() as usize >= base
                            && slice.as_ptr() as usize + slice.len() <= end =>
                    {
                        let start = slice.as_ptr() as usize - base;
                        Ok(start..start + slice.len())
                    }
                    other => Err(other.to_vec()),
                };
                let known = self.topics[topic].kind.is_some();
                pending.push((topic, message.header.log_time, if known { data } else { Err(Vec::new()) }));
            }
        }
        self.files.push((path.into(), bytes));
        for (topic, log_time, data) in pending {
            self.push(topic, log_time, || match data {
                Ok(range) => Payload::Slice { file, range },
                Err(owned) => Payload::Owned(owned),
            });
        }
        Ok(())
    }

    fn open_rosbag2(dir: &Path) -> Result<Self, IoError> {
        let metadata_path = dir.join("metadata.yaml");
        let text = std::fs::read_to_string(&metadata_path)
            .map_err(|source| IoError::Io { path: metadata_path.clone(), source })?;
        let metadata: Rosbag2Metadata = serde_yaml::from_str(&text)
            .map_err(|e| error(&metadata_path, format!("is not rosbag2 metadata: {e}")))?;
        let info = metadata.rosbag2_bagfile_information;
        if info.storage_identifier != "mcap" {
            return Err(error(
                &metadata_path,
                format!("has storage {:?}; {SQLITE_MESSAGE}", info.storage_identifier),
            ));
        }
        if info.relative_file_paths.is_empty() {
            return Err(error(&metadata_path, "lists no files (relative_file_paths is empty)".into()));
        }
        let mut bag = Self::empty(dir, BagFormat::Rosbag2);
        for relative in &info.relative_file_paths {
            let path = dir.join(relative);
            let bytes = std::fs::read(&path).map_err(|source| IoError::Io { path: path.clone(), source })?;
            if !bytes.starts_with(MCAP_MAGIC) {
                return Err(error(&path, "is listed in metadata.yaml but is not an MCAP file".into()));
            }
            bag.add_mcap(&path, bytes)?;
        }
        Ok(bag)
    }

    fn open_ros1(path: &Path) -> Result<Self, IoError> {
        check_ros1_header(path)?;
        let bag = rosbag::RosBag::new(path)
            .map_err(|e| error(path, format!("is not a readable ROS 1 bag: {e}")))?;
        let mut out = Self::empty(path, BagFormat::Ros1);
        // Connection ids to topic indices (connections come before their messages in each chunk).
        let mut connections: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        let mut count = 0usize;
        for record in bag.chunk_records() {
            let record =
                record.map_err(|e| error(path, format!("is damaged after {count} messages: {e}")))?;
            let rosbag::ChunkRecord::Chunk(chunk) = record else { continue };
            for message in chunk.messages() {
                let message =
                    message.map_err(|e| error(path, format!("is damaged after {count} messages: {e}")))?;
                match message {
                    rosbag::MessageRecord::Connection(connection) => {
                        let topic = out.topic_index(connection.topic, connection.tp, Wire::Ros1);
                        connections.insert(connection.id, topic);
                    }
                    rosbag::MessageRecord::MessageData(data) => {
                        count += 1;
                        let Some(&topic) = connections.get(&data.conn_id) else {
                            return Err(error(
                                path,
                                format!(
                                    "message {count} is on connection {} that was never declared",
                                    data.conn_id
                                ),
                            ));
                        };
                        out.push(topic, data.time, || Payload::Owned(data.data.to_vec()));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// A message seen while scanning an MCAP file: topic, log time, and its range of the file or own bytes.
type Pending = (usize, u64, Result<Range<usize>, Vec<u8>>);

const MCAP_MAGIC: &[u8] = b"\x89MCAP0\r\n";
const ROS1_MAGIC: &[u8] = b"#ROSBAG V2.0\n";
const SQLITE_MESSAGE: &str = "gst reads rosbag2 in MCAP storage only; convert a sqlite3 bag with \
     `ros2 bag convert` or `rosbags-convert --dst-storage mcap`";

/// Checks what `rosbag` would index past the end of the file: its bag header's `index_pos` (a truncated
/// bag has its index cut off, and the crate slices without checking).
fn check_ros1_header(path: &Path) -> Result<(), IoError> {
    let bytes = std::fs::read(path).map_err(|source| IoError::Io { path: path.into(), source })?;
    let len = bytes.len();
    let header = bytes.get(ROS1_MAGIC.len()..).unwrap_or(&[]);
    let Some(size) = header.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize) else {
        return Err(error(path, "is truncated inside its bag header".into()));
    };
    let Some(fields) = header.get(4..4 + size) else {
        return Err(error(path, "is truncated inside its bag header".into()));
    };
    let mut rest = fields;
    let mut index_pos = None;
    while rest.len() >= 4 {
        let n = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let Some(field) = rest.get(4..4 + n) else { break };
        if let Some(value) = field.strip_prefix(b"index_pos=")
            && value.len() == 8
        {
            let mut le = [0u8; 8];
            le.copy_from_slice(value);
            index_pos = Some(u64::from_le_bytes(le));
        }
        rest = &rest[4 + n..];
    }
    match index_pos {
        None => Err(error(path, "has no index_pos in its bag header".into())),
        Some(0) => Err(error(
            path,
            "was not closed (index_pos 0: the recorder stopped before writing the index); reindex it with \
             `rosbag reindex`"
                .into(),
        )),
        Some(pos) if pos as usize > len => Err(error(
            path,
            format!("is truncated: its index starts at byte {pos} but the file has {len} bytes"),
        )),
        Some(_) => Ok(()),
    }
}

#[derive(Debug, serde::Deserialize)]
struct Rosbag2Metadata {
    rosbag2_bagfile_information: Rosbag2Info,
}

#[derive(Debug, serde::Deserialize)]
struct Rosbag2Info {
    storage_identifier: String,
    #[serde(default)]
    relative_file_paths: Vec<String>,
}
