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

# Hahn, Pyeon & Kim (2019), "Self-Routing Capsule Networks" (NeurIPS), re-ran the azimuth split
# with their own networks trained to the end, familiar errors not matched: (protocol, network,
# novel error).
SR_CAPSNET = (
    ("azimuth", "CNN", 0.2207),
    ("azimuth", "EM routing", 0.2016),
)
SR_CAPSNET_CITATION = "Hahn, Pyeon & Kim 2019 (SR-CapsNet), smallNORB novel azimuths"


def paper_point(protocol, network):
    """(familiar, novel) error of the paper's `network` ("CNN" or "capsules") on `protocol`, or None."""
    for p, n, fam, novel in PAPER_TABLE2:
        if p == protocol and n == network:
            return fam, novel
    return None
