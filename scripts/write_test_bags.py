#!/usr/bin/env python3
"""Writes a TUM RGB-D directory (as `gst generate` or TumWriter writes it) as robot recordings with the
independent `rosbags` writer, for gst-bag's tests:

  OUT/rosbag2/            rosbag2 folder, MCAP storage: rgb8 colour, 32FC1 depth (metres, exact), CameraInfo
                          (Humble fields d k r p), /tf_static (colour and depth in one optical frame)
  OUT/rosbag2/*.mcap      the same as a plain MCAP file
  OUT/ros1.bag            ROS 1 (Noetic) bag: bgr8 colour, 16UC1 depth (mm), CameraInfo (D K R P), /tf_static

With --variants, also damaged or unusual rosbag2 folders (MCAP storage) for the bad-input tests:

  OUT/variants/two_colour/      two colour topics (/camera/color/image_raw, /camera2/color/image_raw)
  OUT/variants/unknown_encoding colour encoding yuv422
  OUT/variants/depth_size/      depth message 3 is half the colour size
  OUT/variants/no_info/         no CameraInfo topic
  OUT/variants/empty_depth/     a depth topic with no messages
  OUT/variants/empty_colour/    a colour topic with no messages
  OUT/variants/shuffled/        messages written out of stamp order
  OUT/variants/duplicate/       colour message 2 written twice (same stamp)

Usage: write_test_bags.py TUM_DIR OUT_DIR [--variants]
"""
import re
import sys
from pathlib import Path

import numpy as np
from PIL import Image as PilImage
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin, Writer as Writer2
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

FRAME = "camera_color_optical_frame"


def read_list(path):
    rows = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            stamp, name = line.split()[:2]
            rows.append((stamp, name))
    return rows


def read_calibration(path):
    text = path.read_text()
    width = int(re.search(r"image_width:\s*(\d+)", text).group(1))
    height = int(re.search(r"image_height:\s*(\d+)", text).group(1))
    matrices = re.findall(r"data:\s*\[([^\]]*)\]", text)
    k = [float(v) for v in matrices[0].split(",")]
    d = [float(v) for v in matrices[1].split(",")] if len(matrices) > 1 else [0.0] * 5
    return width, height, k, d


def stamp_of(text):
    sec, _, frac = text.partition(".")
    return int(sec), int((frac + "000000000")[:9])


def main():
    tum, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    rgb = read_list(tum / "rgb.txt")
    depth = dict(read_list(tum / "depth.txt"))
    width, height, k, d = read_calibration(tum / "calibration.yaml")
    frames = []
    for stamp, name in rgb:
        colour = np.asarray(PilImage.open(tum / name).convert("RGB"), dtype=np.uint8)
        units = np.asarray(PilImage.open(tum / depth[stamp]), dtype=np.uint16)
        frames.append((stamp_of(stamp), colour, units))

    # ROS 2 (Humble), rosbag2 folder in MCAP storage.
    ts = get_typestore(Stores.ROS2_HUMBLE)
    Image, CameraInfo = ts.types["sensor_msgs/msg/Image"], ts.types["sensor_msgs/msg/CameraInfo"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    Roi = ts.types["sensor_msgs/msg/RegionOfInterest"]
    Tf, Ts = ts.types["tf2_msgs/msg/TFMessage"], ts.types["geometry_msgs/msg/TransformStamped"]
    Tr, V3, Q = (ts.types["geometry_msgs/msg/" + n] for n in ("Transform", "Vector3", "Quaternion"))
    with Writer2(out / "rosbag2", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c_rgb = w.add_connection("/camera/color/image_raw", Image.__msgtype__, typestore=ts)
        c_depth = w.add_connection("/camera/aligned_depth_to_color/image_raw", Image.__msgtype__, typestore=ts)
        c_info = w.add_connection("/camera/color/camera_info", CameraInfo.__msgtype__, typestore=ts)
        c_tf = w.add_connection("/tf_static", Tf.__msgtype__, typestore=ts)
        (sec, nsec), _, _ = frames[0]
        header = Header(stamp=Time(sec=sec, nanosec=nsec), frame_id=FRAME)
        tf = Tf(transforms=[Ts(header=Header(stamp=Time(sec=sec, nanosec=nsec), frame_id="camera_link"),
                               child_frame_id=FRAME,
                               transform=Tr(translation=V3(x=0.0, y=0.015, z=0.0),
                                            rotation=Q(x=-0.5, y=0.5, z=-0.5, w=0.5)))])
        t0 = sec * 10**9 + nsec
        w.write(c_tf, t0, ts.serialize_cdr(tf, Tf.__msgtype__))
        info = CameraInfo(header=header, height=height, width=width, distortion_model="plumb_bob",
                          d=np.array(d, dtype=np.float64), k=np.array(k, dtype=np.float64),
                          r=np.eye(3).flatten(), p=np.array(k[:3] + [0.0] + k[3:6] + [0.0] + k[6:] + [0.0]),
                          binning_x=0, binning_y=0,
                          roi=Roi(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))
        w.write(c_info, t0, ts.serialize_cdr(info, CameraInfo.__msgtype__))
        for (sec, nsec), colour, units in frames:
            header = Header(stamp=Time(sec=sec, nanosec=nsec), frame_id=FRAME)
            t = sec * 10**9 + nsec
            msg = Image(header=header, height=height, width=width, encoding="rgb8", is_bigendian=0,
                        step=width * 3, data=colour.reshape(-1))
            w.write(c_rgb, t, ts.serialize_cdr(msg, Image.__msgtype__))
            metres = units.astype(np.float32) / np.float32(5000.0)
            msg = Image(header=header, height=height, width=width, encoding="32FC1", is_bigendian=0,
                        step=width * 4, data=metres.reshape(-1).view(np.uint8))
            w.write(c_depth, t, ts.serialize_cdr(msg, Image.__msgtype__))

    # ROS 1 (Noetic): tf2_msgs/TFMessage is not in the Noetic store and is registered here.
    ts1 = get_typestore(Stores.ROS1_NOETIC)
    ts1.register(get_types_from_msg("geometry_msgs/TransformStamped[] transforms", "tf2_msgs/msg/TFMessage"))
    Image, CameraInfo = ts1.types["sensor_msgs/msg/Image"], ts1.types["sensor_msgs/msg/CameraInfo"]
    Header, Time = ts1.types["std_msgs/msg/Header"], ts1.types["builtin_interfaces/msg/Time"]
    Roi = ts1.types["sensor_msgs/msg/RegionOfInterest"]
    Tf, Ts = ts1.types["tf2_msgs/msg/TFMessage"], ts1.types["geometry_msgs/msg/TransformStamped"]
    Tr, V3, Q = (ts1.types["geometry_msgs/msg/" + n] for n in ("Transform", "Vector3", "Quaternion"))
    bag = out / "ros1.bag"
    bag.unlink(missing_ok=True)
    with Writer1(bag) as w:
        c_rgb = w.add_connection("/camera/color/image_raw", Image.__msgtype__, typestore=ts1)
        c_depth = w.add_connection("/camera/depth/image_rect_raw", Image.__msgtype__, typestore=ts1)
        c_info = w.add_connection("/camera/color/camera_info", CameraInfo.__msgtype__, typestore=ts1)
        c_tf = w.add_connection("/tf_static", Tf.__msgtype__, typestore=ts1)
        (sec, nsec), _, _ = frames[0]
        t0 = sec * 10**9 + nsec
        tf = Tf(transforms=[Ts(header=Header(seq=0, stamp=Time(sec=sec, nanosec=nsec), frame_id="camera_link"),
                               child_frame_id=FRAME,
                               transform=Tr(translation=V3(x=0.0, y=0.015, z=0.0),
                                            rotation=Q(x=-0.5, y=0.5, z=-0.5, w=0.5)))])
        w.write(c_tf, t0, ts1.serialize_ros1(tf, Tf.__msgtype__))
        header = Header(seq=0, stamp=Time(sec=sec, nanosec=nsec), frame_id=FRAME)
        info = CameraInfo(header=header, height=height, width=width, distortion_model="plumb_bob",
                          D=np.array(d, dtype=np.float64), K=np.array(k, dtype=np.float64),
                          R=np.eye(3).flatten(), P=np.array(k[:3] + [0.0] + k[3:6] + [0.0] + k[6:] + [0.0]),
                          binning_x=0, binning_y=0,
                          roi=Roi(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))
        w.write(c_info, t0, ts1.serialize_ros1(info, CameraInfo.__msgtype__))
        for i, ((sec, nsec), colour, units) in enumerate(frames):
            header = Header(seq=i, stamp=Time(sec=sec, nanosec=nsec), frame_id=FRAME)
            t = sec * 10**9 + nsec
            msg = Image(header=header, height=height, width=width, encoding="bgr8", is_bigendian=0,
                        step=width * 3, data=colour[:, :, ::-1].copy().reshape(-1))
            w.write(c_rgb, t, ts1.serialize_ros1(msg, Image.__msgtype__))
            mm = np.round(units.astype(np.float64) / 5.0).astype(np.uint16)
            msg = Image(header=header, height=height, width=width, encoding="16UC1", is_bigendian=0,
                        step=width * 2, data=mm.reshape(-1).view(np.uint8))
            w.write(c_depth, t, ts1.serialize_ros1(msg, Image.__msgtype__))

    if "--variants" in sys.argv[3:]:
        variants(out / "variants", frames, width, height, k, d)


def variants(out, frames, width, height, k, d):
    ts = get_typestore(Stores.ROS2_HUMBLE)
    Image, CameraInfo = ts.types["sensor_msgs/msg/Image"], ts.types["sensor_msgs/msg/CameraInfo"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    Roi = ts.types["sensor_msgs/msg/RegionOfInterest"]
    colour_topic, depth_topic = "/camera/color/image_raw", "/camera/aligned_depth_to_color/image_raw"

    def header(sec, nsec):
        return Header(stamp=Time(sec=sec, nanosec=nsec), frame_id=FRAME)

    def colour_msg(sec, nsec, colour, encoding="rgb8"):
        return Image(header=header(sec, nsec), height=colour.shape[0], width=colour.shape[1], encoding=encoding,
                     is_bigendian=0, step=colour.shape[1] * 3, data=colour.reshape(-1))

    def depth_msg(sec, nsec, units):
        metres = units.astype(np.float32) / np.float32(5000.0)
        return Image(header=header(sec, nsec), height=metres.shape[0], width=metres.shape[1], encoding="32FC1",
                     is_bigendian=0, step=metres.shape[1] * 4, data=metres.reshape(-1).view(np.uint8))

    def write(name, colour_topics=(colour_topic,), encoding="rgb8", depth=True, info=True, empty=(),
              small_depth_at=None, shuffle=False, duplicate_at=None):
        path = out / name
        messages = []  # (log time, topic, message, type)
        (sec, nsec), _, _ = frames[0]
        if info:
            msg = CameraInfo(header=header(sec, nsec), height=height, width=width, distortion_model="plumb_bob",
                             d=np.array(d, dtype=np.float64), k=np.array(k, dtype=np.float64),
                             r=np.eye(3).flatten(),
                             p=np.array(k[:3] + [0.0] + k[3:6] + [0.0] + k[6:] + [0.0]), binning_x=0, binning_y=0,
                             roi=Roi(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))
            messages.append((sec * 10**9 + nsec, "/camera/color/camera_info", msg, CameraInfo.__msgtype__))
        for i, ((sec, nsec), colour, units) in enumerate(frames):
            t = sec * 10**9 + nsec
            for topic in colour_topics:
                if topic not in empty:
                    messages.append((t, topic, colour_msg(sec, nsec, colour, encoding), Image.__msgtype__))
                    if i == duplicate_at:
                        messages.append((t, topic, colour_msg(sec, nsec, colour, encoding), Image.__msgtype__))
            if depth and depth_topic not in empty:
                if i == small_depth_at:
                    units = units[::2, ::2].copy()
                messages.append((t, depth_topic, depth_msg(sec, nsec, units), Image.__msgtype__))
        if shuffle:
            # A fixed permutation: every image message moves, CameraInfo stays first.
            head, rest = messages[:1], messages[1:]
            rest = rest[1::2][::-1] + rest[0::2]
            messages = head + rest
        with Writer2(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
            connections = {}
            topics = [("/camera/color/camera_info", CameraInfo.__msgtype__)] if info else []
            topics += [(t, Image.__msgtype__) for t in colour_topics]
            if depth:
                topics.append((depth_topic, Image.__msgtype__))
            for topic, msgtype in topics:
                connections[topic] = w.add_connection(topic, msgtype, typestore=ts)
            for t, topic, msg, msgtype in messages:
                w.write(connections[topic], t, ts.serialize_cdr(msg, msgtype))

    write("two_colour", colour_topics=(colour_topic, "/camera2/color/image_raw"))
    write("unknown_encoding", encoding="yuv422")
    write("depth_size", small_depth_at=3)
    write("no_info", info=False)
    write("empty_depth", empty=(depth_topic,))
    write("empty_colour", empty=(colour_topic,))
    write("shuffled", shuffle=True)
    write("duplicate", duplicate_at=2)


if __name__ == "__main__":
    main()
