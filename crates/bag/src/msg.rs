//! The four message types gst reads, in both wire formats: ROS 2's CDR (through `re_cdr` and serde) and
//! ROS 1's serialisation (little-endian, unaligned, `uint32` lengths: small enough to read by hand, and no
//! maintained serde crate for it exists).
//!
//! The structs are the wire layout of ROS 2 (Humble and later); ROS 1 differs only in its header (a `seq`
//! before the stamp, an unsigned `time`) and in CameraInfo's upper-case field names, which do not change
//! the layout. Image and compressed-image data are borrowed from the message bytes.

use serde::{Deserialize, Serialize};

/// The message types gst understands, by their ROS name with `/msg/` removed (`sensor_msgs/Image`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MessageKind {
    Image,
    CompressedImage,
    CameraInfo,
    Tf,
}

impl MessageKind {
    /// The kind of a ROS type name, ROS 1 (`sensor_msgs/Image`) or ROS 2 (`sensor_msgs/msg/Image`).
    pub fn from_type(name: &str) -> Option<Self> {
        match name.replace("/msg/", "/").as_str() {
            "sensor_msgs/Image" => Some(Self::Image),
            "sensor_msgs/CompressedImage" => Some(Self::CompressedImage),
            "sensor_msgs/CameraInfo" => Some(Self::CameraInfo),
            "tf2_msgs/TFMessage" | "tf/tfMessage" => Some(Self::Tf),
            _ => None,
        }
    }
}

/// The wire format of a bag's messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// ROS 2 CDR with its 4-byte encapsulation header.
    Cdr,
    /// ROS 1 serialisation.
    Ros1,
}

/// `builtin_interfaces/Time`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Time {
    pub sec: i32,
    pub nanosec: u32,
}

impl Time {
    /// Nanoseconds since the epoch (negative seconds allowed, as ROS 2's `int32 sec`).
    pub fn nanoseconds(&self) -> i64 {
        i64::from(self.sec) * 1_000_000_000 + i64::from(self.nanosec)
    }

    /// The time of `ns` nanoseconds, when it fits ROS's 32-bit seconds.
    pub fn from_nanoseconds(ns: i64) -> Option<Self> {
        let sec = i32::try_from(ns.div_euclid(1_000_000_000)).ok()?;
        Some(Self { sec, nanosec: ns.rem_euclid(1_000_000_000) as u32 })
    }
}

/// `std_msgs/Header` (ROS 2: no `seq`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub stamp: Time,
    pub frame_id: String,
}

/// `sensor_msgs/Image`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Image<'a> {
    pub header: Header,
    pub height: u32,
    pub width: u32,
    pub encoding: String,
    pub is_bigendian: u8,
    pub step: u32,
    #[serde(borrow, with = "serde_bytes")]
    pub data: &'a [u8],
}

/// `sensor_msgs/CompressedImage`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompressedImage<'a> {
    pub header: Header,
    pub format: String,
    #[serde(borrow, with = "serde_bytes")]
    pub data: &'a [u8],
}

/// `sensor_msgs/RegionOfInterest`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RegionOfInterest {
    pub x_offset: u32,
    pub y_offset: u32,
    pub height: u32,
    pub width: u32,
    pub do_rectify: bool,
}

/// `sensor_msgs/CameraInfo` (ROS 2 names; ROS 1's `D K R P` are the same fields).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CameraInfo {
    pub header: Header,
    pub height: u32,
    pub width: u32,
    pub distortion_model: String,
    pub d: Vec<f64>,
    pub k: [f64; 9],
    pub r: [f64; 9],
    pub p: [f64; 12],
    pub binning_x: u32,
    pub binning_y: u32,
    pub roi: RegionOfInterest,
}

/// `geometry_msgs/Vector3`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Vector3 {
    pub x: f64,
    pub y: f64,
    pub z: f64,
}

/// `geometry_msgs/Quaternion`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Quaternion {
    pub x: f64,
    pub y: f64,
    pub z: f64,
    pub w: f64,
}

/// `geometry_msgs/Transform`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transform {
    pub translation: Vector3,
    pub rotation: Quaternion,
}

/// `geometry_msgs/TransformStamped`: `header.frame_id` is the parent, the transform maps child
/// coordinates into the parent's (`parent_from_child`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransformStamped {
    pub header: Header,
    pub child_frame_id: String,
    pub transform: Transform,
}

/// `tf2_msgs/TFMessage`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TfMessage {
    pub transforms: Vec<TransformStamped>,
}

/// A decoded message of one of the four kinds (short-lived: decoded per frame, so size is not a concern).
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Message<'a> {
    Image(Image<'a>),
    CompressedImage(CompressedImage<'a>),
    CameraInfo(CameraInfo),
    Tf(TfMessage),
}

impl Message<'_> {
    /// The header stamp in nanoseconds (TF messages: their first transform's, 0 when empty).
    pub fn stamp_ns(&self) -> i64 {
        match self {
            Self::Image(m) => m.header.stamp.nanoseconds(),
            Self::CompressedImage(m) => m.header.stamp.nanoseconds(),
            Self::CameraInfo(m) => m.header.stamp.nanoseconds(),
            Self::Tf(m) => m.transforms.first().map_or(0, |t| t.header.stamp.nanoseconds()),
        }
    }

    /// The header's frame id (TF messages: empty).
    pub fn frame_id(&self) -> &str {
        match self {
            Self::Image(m) => &m.header.frame_id,
            Self::CompressedImage(m) => &m.header.frame_id,
            Self::CameraInfo(m) => &m.header.frame_id,
            Self::Tf(_) => "",
        }
    }
}

/// Decodes a message of `kind` from its bytes; the error says what is wrong (the caller adds file, topic
/// and message index).
pub fn decode(kind: MessageKind, wire: Wire, bytes: &[u8]) -> Result<Message<'_>, String> {
    match wire {
        Wire::Cdr => decode_cdr(kind, bytes),
        Wire::Ros1 => {
            let mut reader = Ros1Reader { bytes, position: 0 };
            let message = reader.message(kind)?;
            Ok(message)
        }
    }
}

fn decode_cdr(kind: MessageKind, bytes: &[u8]) -> Result<Message<'_>, String> {
    if bytes.len() < 4 {
        return Err(format!("is {} bytes, shorter than the 4-byte CDR encapsulation header", bytes.len()));
    }
    let (header, body) = bytes.split_at(4);
    let little_endian = match (header[0], header[1]) {
        (0, 0) => false, // CDR_BE
        (0, 1) => true,  // CDR_LE
        (a, b) => {
            return Err(format!(
                "has CDR encapsulation {a:#04x}{b:02x}; gst reads plain CDR (0x0000 big-endian, 0x0001 little-endian)"
            ));
        }
    };
    fn parse<'a, T: Deserialize<'a>>(body: &'a [u8], little_endian: bool) -> Result<T, String> {
        let result = if little_endian {
            re_cdr::from_bytes::<T, re_cdr::LittleEndian>(body)
        } else {
            re_cdr::from_bytes::<T, re_cdr::BigEndian>(body)
        };
        result.map(|(value, _)| value).map_err(|e| format!("is not valid CDR for its type: {e}"))
    }
    Ok(match kind {
        MessageKind::Image => Message::Image(parse(body, little_endian)?),
        MessageKind::CompressedImage => Message::CompressedImage(parse(body, little_endian)?),
        MessageKind::CameraInfo => Message::CameraInfo(parse(body, little_endian)?),
        MessageKind::Tf => Message::Tf(parse(body, little_endian)?),
    })
}

/// Encodes a message as little-endian CDR with its encapsulation header (what ROS 2 publishes).
pub fn encode_cdr<T: Serialize>(message: &T) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8, 1, 0, 0];
    let body = re_cdr::to_vec::<T, re_cdr::LittleEndian>(message).map_err(|e| e.to_string())?;
    out.extend_from_slice(&body);
    Ok(out)
}

/// A cursor over ROS 1 serialised bytes.
struct Ros1Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Ros1Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.position.checked_add(n).filter(|end| *end <= self.bytes.len()).ok_or_else(|| {
            format!(
                "is truncated: {n} bytes needed at offset {} of a {}-byte message",
                self.position,
                self.bytes.len()
            )
        })?;
        let slice = &self.bytes[self.position..end];
        self.position = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn f64(&mut self) -> Result<f64, String> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    fn length(&mut self) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n > self.bytes.len() - self.position {
            return Err(format!(
                "is truncated or corrupt: a length of {n} at offset {} runs past its {} bytes",
                self.position - 4,
                self.bytes.len()
            ));
        }
        Ok(n)
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.length()?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, String> {
        let bytes = self.bytes()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "holds a string that is not UTF-8".to_string())
    }

    fn f64s<const N: usize>(&mut self) -> Result<[f64; N], String> {
        let mut out = [0.0; N];
        for value in &mut out {
            *value = self.f64()?;
        }
        Ok(out)
    }

    fn header(&mut self) -> Result<Header, String> {
        let _seq = self.u32()?;
        let sec = self.u32()?;
        let nanosec = self.u32()?;
        let sec = i32::try_from(sec).map_err(|_| format!("has a stamp of {sec} s, past 2038"))?;
        Ok(Header { stamp: Time { sec, nanosec }, frame_id: self.string()? })
    }

    fn message(&mut self, kind: MessageKind) -> Result<Message<'a>, String> {
        Ok(match kind {
            MessageKind::Image => Message::Image(Image {
                header: self.header()?,
                height: self.u32()?,
                width: self.u32()?,
                encoding: self.string()?,
                is_bigendian: self.u8()?,
                step: self.u32()?,
                data: self.bytes()?,
            }),
            MessageKind::CompressedImage => Message::CompressedImage(CompressedImage {
                header: self.header()?,
                format: self.string()?,
                data: self.bytes()?,
            }),
            MessageKind::CameraInfo => {
                let header = self.header()?;
                let height = self.u32()?;
                let width = self.u32()?;
                let distortion_model = self.string()?;
                let n = self.u32()? as usize;
                if n.saturating_mul(8) > self.bytes.len() - self.position {
                    return Err(format!(
                        "is truncated or corrupt: {n} distortion coefficients run past its end"
                    ));
                }
                let mut d = Vec::with_capacity(n);
                for _ in 0..n {
                    d.push(self.f64()?);
                }
                Message::CameraInfo(CameraInfo {
                    header,
                    height,
                    width,
                    distortion_model,
                    d,
                    k: self.f64s()?,
                    r: self.f64s()?,
                    p: self.f64s()?,
                    binning_x: self.u32()?,
                    binning_y: self.u32()?,
                    roi: RegionOfInterest {
                        x_offset: self.u32()?,
                        y_offset: self.u32()?,
                        height: self.u32()?,
                        width: self.u32()?,
                        do_rectify: self.u8()? != 0,
                    },
                })
            }
            MessageKind::Tf => {
                let n = self.length()?;
                let mut transforms = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let header = self.header()?;
                    let child_frame_id = self.string()?;
                    let [tx, ty, tz, qx, qy, qz, qw] = self.f64s()?;
                    transforms.push(TransformStamped {
                        header,
                        child_frame_id,
                        transform: Transform {
                            translation: Vector3 { x: tx, y: ty, z: tz },
                            rotation: Quaternion { x: qx, y: qy, z: qz, w: qw },
                        },
                    });
                }
                Message::Tf(TfMessage { transforms })
            }
        })
    }
}

/// `ros2msg` schema texts, as ROS 2's recorder writes them (the type, then each type it uses).
pub mod schema {
    const SEPARATOR: &str =
        "\n================================================================================\n";
    const HEADER: &str = "MSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id";
    const TIME: &str = "MSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec";

    pub fn image() -> String {
        [
            "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\nuint8 is_bigendian\nuint32 step\nuint8[] data",
            HEADER,
            TIME,
        ]
        .join(SEPARATOR)
    }

    pub fn camera_info() -> String {
        [
            "std_msgs/Header header\nuint32 height\nuint32 width\nstring distortion_model\nfloat64[] d\nfloat64[9] k\nfloat64[9] r\nfloat64[12] p\nuint32 binning_x\nuint32 binning_y\nsensor_msgs/RegionOfInterest roi",
            HEADER,
            TIME,
            "MSG: sensor_msgs/RegionOfInterest\nuint32 x_offset\nuint32 y_offset\nuint32 height\nuint32 width\nbool do_rectify",
        ]
        .join(SEPARATOR)
    }

    pub fn tf_message() -> String {
        [
            "geometry_msgs/TransformStamped[] transforms",
            "MSG: geometry_msgs/TransformStamped\nstd_msgs/Header header\nstring child_frame_id\nTransform transform",
            HEADER,
            TIME,
            "MSG: geometry_msgs/Transform\nVector3 translation\nQuaternion rotation",
            "MSG: geometry_msgs/Vector3\nfloat64 x\nfloat64 y\nfloat64 z",
            "MSG: geometry_msgs/Quaternion\nfloat64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1",
        ]
        .join(SEPARATOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdr_round_trips_and_truncation_is_an_error() -> Result<(), String> {
        let data = [1u8, 2, 3, 4, 5, 6];
        let image = Image {
            header: Header { stamp: Time { sec: 12, nanosec: 345 }, frame_id: "cam".into() },
            height: 1,
            width: 2,
            encoding: "rgb8".into(),
            is_bigendian: 0,
            step: 6,
            data: &data,
        };
        let bytes = encode_cdr(&image)?;
        assert_eq!(decode(MessageKind::Image, Wire::Cdr, &bytes)?, Message::Image(image));
        let error = decode(MessageKind::Image, Wire::Cdr, &bytes[..bytes.len() - 2]).err();
        assert!(error.is_some_and(|e| e.contains("not valid CDR")));
        Ok(())
    }

    #[test]
    fn ros1_reader_refuses_lengths_past_the_end() {
        // seq, sec, nsec, then a frame_id length far past the end.
        let mut bytes = vec![0u8; 12];
        bytes.extend_from_slice(&1000u32.to_le_bytes());
        let error = decode(MessageKind::Image, Wire::Ros1, &bytes).err();
        assert!(error.is_some_and(|e| e.contains("runs past")), "{bytes:?}");
    }
}
