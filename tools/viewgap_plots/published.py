"""Published numbers that viewgap's tables and figures set beside their own. Standard library
only: the table tools, which need no matplotlib, import it too."""

# Hinton, Sabour & Frosst (2018), "Matrix capsules with EM routing", Table 2: smallNORB, each
# network stopped at a matched familiar test error; (protocol, network, familiar error, novel
# error). The CNN is their 4.2M-parameter baseline, "capsules" their EM-routing network.
PAPER_TABLE2 = (
    ("azimuth", "CNN", 0.037, 0.200),
    ("azimuth", "capsules", 0.037, 0.135),
    ("elevation", "CNN", 0.043, 0.178),
    ("elevation", "capsules", 0.043, 0.123),
)
PAPER_CITATION = "Hinton, Sabour & Frosst 2018, Table 2"
# Their section 5: the CNN baseline has 4.2M parameters, the capsule network of A = B = C = D = 32
# 310K, the smaller one of A = 64, B = 8, C = D = 16 68K (which of the two Table 2 ran is not said).
PAPER_SIZES = ("Hinton, Sabour & Frosst 2018: the CNN baseline 4.2M parameters, the capsule networks 310K "
               "(A = B = C = D = 32) and 68K (A = 64, B = 8, C = D = 16)")

# Hahn, Pyeon & Kim (2019), "Self-Routing Capsule Networks" (NeurIPS), re-ran the azimuth split
# with their own networks trained to the end, familiar errors not matched: (protocol, network,
# novel error).
SR_CAPSNET = (
    ("azimuth", "CNN", 0.2207),
    ("azimuth", "EM routing", 0.2016),
)
SR_CAPSNET_CITATION = "Hahn, Pyeon & Kim 2019 (SR-CapsNet), smallNORB novel azimuths"

# Sabour, Frosst & Hinton (2017), "Dynamic routing between capsules", section 5.2: a CapsNet and a
# CNN "with a similar number of parameters", trained on MNIST digits placed at random on a 40 x 40
# black canvas, reached 99.23 % and 99.22 % on that expanded test set, and 79 % and 66 % on
# affNIST (the test digits under small random affine transformations): network -> (familiar
# error, novel error). Their CapsNet has 8.2M parameters at 28 x 28 (6.8M without its
# reconstruction decoder); the paper gives neither network's size at 40 x 40.
SABOUR_AFFNIST = {"CNN": (0.0078, 0.34), "CapsNet": (0.0077, 0.21)}
SABOUR_AFFNIST_CITATION = "Sabour, Frosst & Hinton 2017, section 5.2"
SABOUR_AFFNIST_PROTOCOL = "trained on MNIST moved about a 40 × 40 canvas, tested on affNIST"
SABOUR_AFFNIST_SIZES = ("Sabour, Frosst & Hinton 2017: CapsNet 8.2M parameters at 28 × 28 (6.8M without its "
                        "decoder; its size at 40 × 40 not given), the CNN \"a similar number of parameters\"")

# The held-out axes of viewpoint protocols; a sweep along any other axis but "none" (a standard
# split) changes its images in the plane.
VIEWPOINT_AXES = ("azimuth", "elevation")


def in_plane(axis):
    """Whether a sweep's held-out axis (frontier.csv's `axis`) is an in-plane change: affNIST's kind."""
    return axis not in VIEWPOINT_AXES + ("none", "")


def paper_point(protocol, network):
    """(familiar, novel) error of the paper's `network` ("CNN" or "capsules") on `protocol`, or None."""
    for p, n, fam, novel in PAPER_TABLE2:
        if p == protocol and n == network:
            return fam, novel
    return None


def published_points(axis):
    """The published (label, familiar error, novel error, capsules?) points a frontier along `axis`
    is set beside, and their citation: the paper's Table 2 points of that protocol along a
    viewpoint axis, Sabour et al.'s affNIST result along an in-plane one, none otherwise."""
    if axis in VIEWPOINT_AXES:
        return ([(f"{net}, {p}", fam, novel, net == "capsules")
                 for p, net, fam, novel in PAPER_TABLE2 if p == axis], PAPER_CITATION)
    if in_plane(axis):
        return ([(f"{net}, affNIST", fam, novel, net == "CapsNet")
                 for net, (fam, novel) in SABOUR_AFFNIST.items()], SABOUR_AFFNIST_CITATION)
    return [], None
