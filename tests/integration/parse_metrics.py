#!/usr/bin/python3
"""Reads an OpenMetrics exposition (from a URL, or stdin with "-"), parses it
with prometheus_client's strict OpenMetrics parser, and prints what it found
as JSON: {"content_type": ..., "families": {name: type}, "samples": [...]}.
Exits 1 (with the parser's complaint on stderr) when the text is invalid."""
import json
import sys
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def main():
    source = sys.argv[1]
    content_type = None
    if source == "-":
        text = sys.stdin.read()
    else:
        with urllib.request.urlopen(source, timeout=10) as response:
            content_type = response.headers.get("Content-Type")
            text = response.read().decode("utf-8")
    families, samples = {}, []
    try:
        for family in text_string_to_metric_families(text):
            families[family.name] = family.type
            for s in family.samples:
                samples.append({"name": s.name, "labels": s.labels, "value": s.value})
    except ValueError as e:
        print("invalid OpenMetrics: %s" % e, file=sys.stderr)
        return 1
    json.dump({"content_type": content_type, "families": families, "samples": samples},
              sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
