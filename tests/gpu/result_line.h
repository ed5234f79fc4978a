// The one machine-readable line each GPU test program prints for run.sh:
//   RESULT {"key": 1.5, "name": "text"}
// run.sh merges every RESULT line of a test into that test's "numbers" in
// results.json. Keys and string values must not need JSON escaping (plain
// identifiers and short words). Not thread-safe: fill and print from one
// thread.
//   ResultLine r;  r.Add("blocks", 15);  r.Add("path", "linear");  r.Print();
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

class ResultLine {
 public:
  void Add(const std::string& key, double value) {
    char buf[64];
    if (std::isfinite(value)) {
      std::snprintf(buf, sizeof buf, "%.6g", value);
    } else {
      std::snprintf(buf, sizeof buf, "null");
    }
    Append(key, buf);
  }
  void Add(const std::string& key, const char* text) { Append(key, "\"" + std::string(text) + "\""); }
  void Add(const std::string& key, const std::string& text) { Add(key, text.c_str()); }

  // Prints the line and starts a new one.
  void Print() {
    std::printf("RESULT {%s}\n", body_.c_str());
    std::fflush(stdout);
    body_.clear();
  }

 private:
  void Append(const std::string& key, const std::string& json) {
    if (!body_.empty()) body_ += ", ";
    body_ += "\"" + key + "\": " + json;
  }
  std::string body_;
};
