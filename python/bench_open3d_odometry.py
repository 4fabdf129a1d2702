"""The Open3D peer of `gst bench slam`: RGB-D odometry chained frame to frame over a TUM RGB-D sequence.

Each frame k is registered to frame k-1 with `o3d.pipelines.odometry.compute_rgbd_odometry` (hybrid
photometric + geometric Jacobian, Open3D's default `OdometryOption` unless told otherwise), initialised with
the previous frame's motion (constant velocity); a frame whose odometry fails keeps that guess. The chained
camera-to-world poses, starting at the identity, are written as a TUM trajectory. There is no keyframing, no
loop closure and no global optimisation: this is the drift-accumulating odometry baseline.

Reads DIR/rgb.txt and DIR/depth.txt (associated by nearest timestamp, as TUM's associate.py does) and the
intrinsics from --intrinsics or DIR/calibration.yaml (OpenCV FileStorage, as gst writes it). Writes the
trajectory to --trajectory and a JSON report to --report:

  frames, odometry_failures, tracking_seconds (RGBDImage creation + odometry, image decoding excluded,
  like gst's `tracking_seconds`), tracking_fps, total_seconds (with decoding), peak_rss_mb (this process's
  ru_maxrss: the interpreter and Open3D's libraries included), threads, open3d_version, settings.
"""

import argparse
import json
import os
import re
import resource
import sys
import time

import numpy as np
import open3d as o3d

# Largest colour/depth timestamp difference for a pair, seconds (TUM's associate.py default).
MAX_DIFFERENCE_S = 0.02


def read_list(path):
    """`timestamp path` lines of a TUM list, comments skipped."""
    entries = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) < 2:
                sys.exit(f"error: {path}:{number}: expected 'timestamp path', got {line!r}")
            entries.append((float(parts[0]), parts[1]))
    return entries


def associate(rgb, depth, max_difference_s=MAX_DIFFERENCE_S):
    """Pairs of (rgb entry, depth entry): greedy nearest timestamps, each entry used once, in rgb order."""
    depth_stamps = np.array([t for t, _ in depth])
    candidates = []
    for i, (t, _) in enumerate(rgb):
        j = int(np.argmin(np.abs(depth_stamps - t))) if len(depth_stamps) else -1
        if j >= 0 and abs(depth_stamps[j] - t) < max_difference_s:
            candidates.append((abs(depth_stamps[j] - t), i, j))
    used_rgb, used_depth, pairs = set(), set(), []
    for _, i, j in sorted(candidates):
        if i not in used_rgb and j not in used_depth:
            used_rgb.add(i)
            used_depth.add(j)
            pairs.append((i, j))
    pairs.sort()
    return [(rgb[i], depth[j]) for i, j in pairs]


def read_calibration(path):
    """width, height, fx, fy, cx, cy and depth_scale (or None) from an OpenCV FileStorage YAML."""
    with open(path) as f:
        text = f.read()

    def scalar(key):
        m = re.search(rf"^{key}:\s*([-+0-9.eE]+)", text, re.MULTILINE)
        return float(m.group(1)) if m else None

    m = re.search(r"camera_matrix:.*?data:\s*\[([^\]]*)\]", text, re.DOTALL)
    width, height = scalar("image_width"), scalar("image_height")
    if m is None or width is None or height is None:
        sys.exit(f"error: {path}: expected image_width, image_height and camera_matrix")
    k = [float(v) for v in m.group(1).replace("\n", " ").split(",")]
    if len(k) != 9:
        sys.exit(f"error: {path}: camera_matrix must have 9 values, has {len(k)}")
    return int(width), int(height), k[0], k[4], k[2], k[5], scalar("depth_scale")


def quaternion_xyzw(r):
    """Unit quaternion (x, y, z, w) of a rotation matrix (Shepperd's method)."""
    trace = np.trace(r)
    if trace > 0:
        s = 2.0 * np.sqrt(trace + 1.0)
        q = [(r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s, 0.25 * s]
    elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
        s = 2.0 * np.sqrt(1.0 + r[0, 0] - r[1, 1] - r[2, 2])
        q = [0.25 * s, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s, (r[2, 1] - r[1, 2]) / s]
    elif r[1, 1] > r[2, 2]:
        s = 2.0 * np.sqrt(1.0 + r[1, 1] - r[0, 0] - r[2, 2])
        q = [(r[0, 1] + r[1, 0]) / s, 0.25 * s, (r[1, 2] + r[2, 1]) / s, (r[0, 2] - r[2, 0]) / s]
    else:
        s = 2.0 * np.sqrt(1.0 + r[2, 2] - r[0, 0] - r[1, 1])
        q = [(r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, 0.25 * s, (r[1, 0] - r[0, 1]) / s]
    q = np.array(q)
    return q / np.linalg.norm(q)


def peak_rss_mb():
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="TUM RGB-D directory (rgb.txt, depth.txt, images)")
    parser.add_argument("--trajectory", required=True, help="output TUM trajectory (camera-to-world)")
    parser.add_argument("--report", required=True, help="output JSON report")
    parser.add_argument("--intrinsics", nargs=4, type=float, metavar=("FX", "FY", "CX", "CY"),
                        help="pinhole intrinsics; default: DIR/calibration.yaml")
    parser.add_argument("--size", nargs=2, type=int, metavar=("WIDTH", "HEIGHT"),
                        help="image size; default: DIR/calibration.yaml")
    parser.add_argument("--depth-scale", type=float, help="depth PNG units per metre (default: "
                        "calibration.yaml's depth_scale, else 5000)")
    parser.add_argument("--depth-trunc", type=float, default=8.0,
                        help="depth beyond this many metres is dropped (default 8)")
    parser.add_argument("--odometry-depth-max", type=float,
                        help="OdometryOption.depth_max, metres (default: Open3D's, 4)")
    parser.add_argument("--init", choices=["velocity", "identity"], default="velocity",
                        help="initial guess of each registration (default: the previous motion)")
    parser.add_argument("--max-frames", type=int, help="only the first N frames")
    args = parser.parse_args()

    started_total = time.perf_counter()
    calibration_path = os.path.join(args.dir, "calibration.yaml")
    calibration = read_calibration(calibration_path) if os.path.isfile(calibration_path) else None
    if args.intrinsics is None or args.size is None:
        if calibration is None:
            sys.exit(f"error: {args.dir} has no calibration.yaml; give --intrinsics and --size")
    width, height = args.size if args.size else calibration[:2]
    fx, fy, cx, cy = args.intrinsics if args.intrinsics else calibration[2:6]
    depth_scale = args.depth_scale or (calibration[6] if calibration and calibration[6] else 5000.0)

    pairs = associate(read_list(os.path.join(args.dir, "rgb.txt")), read_list(os.path.join(args.dir, "depth.txt")))
    if args.max_frames:
        pairs = pairs[: args.max_frames]
    if len(pairs) < 2:
        sys.exit(f"error: {args.dir}: fewer than two associated colour/depth frames")

    intrinsic = o3d.camera.PinholeCameraIntrinsic(width, height, fx, fy, cx, cy)
    option = o3d.pipelines.odometry.OdometryOption()
    if args.odometry_depth_max is not None:
        option = o3d.pipelines.odometry.OdometryOption(depth_max=args.odometry_depth_max)
    jacobian = o3d.pipelines.odometry.RGBDOdometryJacobianFromHybridTerm()

    def load(pair):
        (_, rgb_path), (_, depth_path) = pair
        color = o3d.io.read_image(os.path.join(args.dir, rgb_path))
        depth = o3d.io.read_image(os.path.join(args.dir, depth_path))
        if color.is_empty() or depth.is_empty():
            sys.exit(f"error: cannot read {rgb_path} or {depth_path} in {args.dir}")
        return color, depth

    def rgbd_of(color, depth):
        return o3d.geometry.RGBDImage.create_from_color_and_depth(
            color, depth, depth_scale=depth_scale, depth_trunc=args.depth_trunc, convert_rgb_to_intensity=True)

    tracking_seconds = 0.0
    color, depth = load(pairs[0])
    t0 = time.perf_counter()
    previous = rgbd_of(color, depth)
    tracking_seconds += time.perf_counter() - t0
    world_from_camera = np.eye(4)
    motion = np.eye(4)  # previous_from_current of the last frame
    poses = [(pairs[0][0][0], world_from_camera.copy())]
    failures = 0
    for k, pair in enumerate(pairs[1:], 1):
        color, depth = load(pair)
        t0 = time.perf_counter()
        current = rgbd_of(color, depth)
        init = motion if args.init == "velocity" else np.eye(4)
        # Source = current, target = previous: the result maps current-camera points into the previous
        # camera, i.e. previous_from_current.
        success, previous_from_current, _ = o3d.pipelines.odometry.compute_rgbd_odometry(
            current, previous, intrinsic, init, jacobian, option)
        tracking_seconds += time.perf_counter() - t0
        if success:
            motion = np.asarray(previous_from_current)
        else:
            failures += 1
            motion = init
        world_from_camera = world_from_camera @ motion
        poses.append((pair[0][0], world_from_camera.copy()))
        previous = current
        if k % 200 == 0:
            print(f"open3d odometry: {k}/{len(pairs)} frames", file=sys.stderr, flush=True)
    total_seconds = time.perf_counter() - started_total

    lines = ["# timestamp tx ty tz qx qy qz qw (camera-to-world), Open3D RGB-D odometry chained\n"]
    for stamp, pose in poses:
        t = pose[:3, 3]
        q = quaternion_xyzw(pose[:3, :3])
        lines.append(f"{stamp:.6f} {t[0]:.9f} {t[1]:.9f} {t[2]:.9f} {q[0]:.9f} {q[1]:.9f} {q[2]:.9f} {q[3]:.9f}\n")
    for path, text in [(args.trajectory, "".join(lines))]:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)

    report = {
        "frames": len(poses),
        "odometry_failures": failures,
        "tracking_seconds": tracking_seconds,
        "tracking_fps": len(poses) / tracking_seconds,
        "total_seconds": total_seconds,
        "peak_rss_mb": peak_rss_mb(),
        "threads": os.cpu_count(),
        "open3d_version": o3d.__version__,
        "settings": {
            "jacobian": "hybrid",
            "init": args.init,
            "depth_scale": depth_scale,
            "depth_trunc_m": args.depth_trunc,
            "odometry_depth_max_m": option.depth_max,
            "odometry_depth_diff_max_m": option.depth_diff_max,
            "iterations_per_level": list(option.iteration_number_per_pyramid_level),
            "intrinsics": [fx, fy, cx, cy],
            "size": [width, height],
        },
    }
    with open(args.report + ".tmp", "w") as f:
        json.dump(report, f, indent=2)
    os.replace(args.report + ".tmp", args.report)


if __name__ == "__main__":
    main()
