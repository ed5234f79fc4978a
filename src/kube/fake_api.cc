#include "kube/fake_api.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <string_view>

#include "kube/api_error.h"
#include "kube/paths.h"

namespace tessera::kube {
namespace {

// An apiserver path taken apart: /api/v1[/namespaces/{ns}]/{resource}[/{name}[/{sub}]],
// or the same under /apis/{group}/{version}.
struct Target {
  std::string prefix;    // "/api/v1" or "/apis/<group>/<version>"
  std::string ns;        // "" : cluster-scoped, or every namespace for a collection
  std::string resource;  // "pods"
  std::string name;      // "" : the collection
  std::string sub;       // a subresource ("status"), unsupported

  std::string Collection() const {
    return prefix + (ns.empty() ? "" : "/namespaces/" + ns) + "/" + resource;
  }
  std::string Key() const { return Collection() + "/" + name; }
};

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    out.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

Result<Target> ParsePath(std::string_view path) {
  const auto bad = [&](std::string_view why) {
    return InvalidArgument("FakeApi: path \"" + std::string(path) + "\" " + std::string(why));
  };
  if (path.empty() || path.front() != '/') return bad("is not absolute");
  std::vector<std::string> parts = Split(path.substr(1), '/');
  Target t;
  size_t i = 0;
  if (parts.size() >= 2 && parts[0] == "api") {
    t.prefix = "/api/" + parts[1];
    i = 2;
  } else if (parts.size() >= 3 && parts[0] == "apis") {
    t.prefix = "/apis/" + parts[1] + "/" + parts[2];
    i = 3;
  } else {
    return bad("is neither /api/<version>/... nor /apis/<group>/<version>/...");
  }
  std::vector<std::string> rest(parts.begin() + static_cast<std::ptrdiff_t>(i), parts.end());
  if (std::any_of(rest.begin(), rest.end(), [](const std::string& p) { return p.empty(); })) {
    return bad("has an empty segment");
  }
  // /namespaces/{ns}/{resource}...; /namespaces/{ns} alone is the Namespace object.
  if (rest.size() >= 3 && rest[0] == "namespaces") {
    t.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (rest.empty()) return bad("names no resource");
  if (rest.size() > 3) return bad("has more segments than resource, name and subresource");
  t.resource = rest[0];
  if (rest.size() >= 2) t.name = rest[1];
  if (rest.size() == 3) t.sub = rest[2];
  return t;
}

// %XX escapes decoded; '+' is left alone (paths.h never writes it for a space).
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned value = 0;
    if (s[i] == '%' && i + 2 < s.size() &&
        std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16).ptr == s.data() + i + 3) {
      out += static_cast<char>(value);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// One requirement of a selector: key op value, op one of "=", "!=", "exists", "!exists".
struct Requirement {
  std::string key;
  std::string op;
  std::string value;
};

Result<std::vector<Requirement>> ParseSelector(const std::string& selector, bool labels) {
  std::vector<Requirement> out;
  if (selector.empty()) return out;
  for (std::string term : Split(selector, ',')) {
    term.erase(0, term.find_first_not_of(' '));
    term.erase(term.find_last_not_of(' ') + 1);
    Requirement r;
    if (size_t at = term.find("!="); at != std::string::npos) {
      r = {term.substr(0, at), "!=", term.substr(at + 2)};
    } else if (at = term.find("=="); at != std::string::npos) {
      r = {term.substr(0, at), "=", term.substr(at + 2)};
    } else if (at = term.find('='); at != std::string::npos) {
      r = {term.substr(0, at), "=", term.substr(at + 1)};
    } else if (labels && !term.empty() && term.front() == '!') {
      r = {term.substr(1), "!exists", ""};
    } else if (labels) {
      r = {term, "exists", ""};
    }
    const bool plain = !r.key.empty() && r.key.find_first_of(" ()!") == std::string::npos &&
                       r.value.find_first_of(" ()") == std::string::npos;
    if (r.op.empty() || !plain) {
      return InvalidArgument(std::string("FakeApi: ") + (labels ? "label" : "field") + " selector term \"" + term +
                             "\" is not supported (key=value, key==value, key!=value" +
                             (labels ? ", key, !key)" : ")"));
    }
    out.push_back(std::move(r));
  }
  return out;
}

// The string at a dotted field path ("spec.nodeName"); "" when absent.
std::string FieldOf(const nlohmann::json& obj, const std::string& dotted) {
  const nlohmann::json* at = &obj;
  for (const std::string& part : Split(dotted, '.')) {
    if (!at->is_object()) return "";
    auto it = at->find(part);
    if (it == at->end()) return "";
    at = &*it;
  }
  if (at->is_string()) return at->get<std::string>();
  if (at->is_null() || at->is_object() || at->is_array()) return "";
  return at->dump();
}

struct Selectors {
  std::vector<Requirement> fields;
  std::vector<Requirement> labels;

  bool Match(const nlohmann::json& obj) const {
    for (const Requirement& r : fields) {
      if ((FieldOf(obj, r.key) == r.value) != (r.op == "=")) return false;
    }
    const nlohmann::json* found = nullptr;
    if (auto meta = obj.find("metadata"); meta != obj.end() && meta->is_object()) {
      if (auto l = meta->find("labels"); l != meta->end() && l->is_object()) found = &*l;
    }
    for (const Requirement& r : labels) {
      const bool has = found != nullptr && found->contains(r.key) && (*found)[r.key].is_string();
      const std::string value = has ? (*found)[r.key].get<std::string>() : "";
      if (r.op == "exists" && !has) return false;
      if (r.op == "!exists" && has) return false;
      if (r.op == "=" && (!has || value != r.value)) return false;
      if (r.op == "!=" && has && value == r.value) return false;
    }
    return true;
  }
};

Result<Selectors> MakeSelectors(const std::string& label_selector, const std::string& field_selector) {
  Selectors s;
  TESSERA_ASSIGN_OR_RETURN(s.labels, ParseSelector(label_selector, true));
  TESSERA_ASSIGN_OR_RETURN(s.fields, ParseSelector(field_selector, false));
  return s;
}

bool InCollection(const Target& collection, const Target& object) {
  return object.prefix == collection.prefix && object.resource == collection.resource &&
         (collection.ns.empty() || collection.ns == object.ns);
}

// The API server's error for `verb path`, with the real client's code and wording.
Status ApiError(std::string_view verb, std::string_view path, int code, std::string_view reason,
                std::string_view message) {
  const nlohmann::json status = {{"kind", "Status"}, {"code", code}, {"reason", reason}, {"message", message}};
  return ErrorFromApiStatus(std::string(verb) + " " + std::string(path), status, verb == "POST");
}

Status NotFoundError(std::string_view verb, std::string_view path, const Target& t) {
  return ApiError(verb, path, 404, "NotFound", t.resource + " \"" + t.name + "\" not found");
}

Status ConflictError(std::string_view verb, std::string_view path, const Target& t, std::string_view why) {
  return ApiError(verb, path, 409, "Conflict",
                  "Operation cannot be fulfilled on " + t.resource + " \"" + t.name + "\": " + std::string(why));
}

std::string MetaString(const nlohmann::json& obj, const char* field) {
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return "";
  auto it = meta->find(field);
  return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
}

// A subresource POST's uid precondition (binding, eviction): OK when `uid`
// is empty or the stored object's; the API server's 409 otherwise.
Status CheckUid(std::string_view verb_path, const nlohmann::json& stored, const std::string& uid) {
  if (uid.empty() || uid == MetaString(stored, "uid")) return Status::Ok();
  return ApiError("POST", verb_path, 409, "Conflict",
                  "Precondition failed: UID in precondition: " + uid + ", UID in object meta: " + MetaString(stored, "uid"));
}

// A pod-uid-shaped uid (8-4-4-4-12 hex), distinct per n.
std::string UidFor(uint64_t n) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012llx", static_cast<unsigned long long>(n));
  return buf;
}

Result<Target> ObjectTarget(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(Target t, ParsePath(path));
  if (t.name.empty()) return InvalidArgument("FakeApi: \"" + path + "\" is a collection, not an object");
  if (!t.sub.empty()) return InvalidArgument("FakeApi: the subresource \"" + t.sub + "\" is not supported");
  return t;
}

Result<Target> CollectionTarget(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(Target t, ParsePath(path));
  if (!t.name.empty()) return InvalidArgument("FakeApi: \"" + path + "\" is an object, not a collection");
  return t;
}

}  // namespace

Status FakeApi::Begin(Call call) {
  Hook hook;
  {
    MutexLock lock(mu_);
    calls_.push_back(call);
    hook = hook_;
  }
  return hook ? hook(call) : Status::Ok();
}

nlohmann::json FakeApi::CommitLocked(const std::string& key, nlohmann::json after) {
  Write w;
  w.rv = ++rv_;
  w.key = key;
  if (auto it = objects_.find(key); it != objects_.end()) w.before = it->second;
  if (after.is_null()) {
    objects_.erase(key);
  } else {
    after["metadata"]["resourceVersion"] = std::to_string(w.rv);
    objects_[key] = after;
  }
  w.after = after;
  history_.push_back(std::move(w));
  changed_.NotifyAll();
  return after;
}

Result<nlohmann::json> FakeApi::Get(const std::string& path) {
  TESSERA_RETURN_IF_ERROR(Begin({"GET", path, nullptr}));
  TESSERA_ASSIGN_OR_RETURN(Target t, ObjectTarget(path));
  MutexLock lock(mu_);
  auto it = objects_.find(t.Key());
  if (it == objects_.end()) return NotFoundError("GET", path, t);
  return it->second;
}

Result<nlohmann::json> FakeApi::List(const std::string& path, const std::string& label_selector,
                                     const std::string& field_selector, int /*page_size*/) {
  TESSERA_RETURN_IF_ERROR(Begin({"LIST", path, nullptr}));
  TESSERA_ASSIGN_OR_RETURN(Target c, CollectionTarget(path));
  TESSERA_ASSIGN_OR_RETURN(Selectors selectors, MakeSelectors(label_selector, field_selector));
  MutexLock lock(mu_);
  nlohmann::json items = nlohmann::json::array();
  for (const auto& [key, obj] : objects_) {
    auto t = ParsePath(key);
    if (t.ok() && InCollection(c, *t) && selectors.Match(obj)) items.push_back(obj);
  }
  return nlohmann::json{{"items", std::move(items)}, {"resourceVersion", std::to_string(rv_)}};
}

Result<nlohmann::json> FakeApi::Create(const std::string& path, const nlohmann::json& body) {
  TESSERA_RETURN_IF_ERROR(Begin({"POST", path, body}));
  TESSERA_ASSIGN_OR_RETURN(Target c, CollectionTarget(path));
  if (!body.is_object()) return ApiError("POST", path, 400, "BadRequest", "the body is not an object");
  nlohmann::json obj = body;
  nlohmann::json& meta = obj["metadata"];
  if (!meta.is_object()) meta = nlohmann::json::object();
  const std::string given_ns = MetaString(obj, "namespace");
  if (!given_ns.empty() && given_ns != c.ns) {
    return ApiError("POST", path, 400, "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request");
  }
  MutexLock lock(mu_);
  std::string name = MetaString(obj, "name");
  if (name.empty()) {
    const std::string generate = MetaString(obj, "generateName");
    if (generate.empty()) return ApiError("POST", path, 422, "Invalid", "metadata.name: Required value");
    name = generate + std::to_string(++next_id_);
  }
  Target t = c;
  t.name = name;
  if (objects_.count(t.Key())) {
    return ApiError("POST", path, 409, "AlreadyExists", c.resource + " \"" + name + "\" already exists");
  }
  meta["name"] = name;
  if (!c.ns.empty()) meta["namespace"] = c.ns;
  meta["uid"] = UidFor(++next_id_);
  return CommitLocked(t.Key(), std::move(obj));
}

Result<nlohmann::json> FakeApi::Patch(const std::string& path, PatchType type, const nlohmann::json& patch) {
  TESSERA_RETURN_IF_ERROR(Begin({"PATCH", path, patch}));
  TESSERA_ASSIGN_OR_RETURN(Target t, ObjectTarget(path));
  if (type != PatchType::kMerge) {
    return Status(StatusCode::kUnimplemented, "FakeApi: only merge patches (PatchType::kMerge) are supported");
  }
  if (!patch.is_object()) return ApiError("PATCH", path, 400, "BadRequest", "a merge patch must be an object");
  MutexLock lock(mu_);
  auto it = objects_.find(t.Key());
  if (it == objects_.end()) return NotFoundError("PATCH", path, t);
  const nlohmann::json& stored = it->second;
  if (const std::string want = MetaString(patch, "resourceVersion");
      !want.empty() && want != MetaString(stored, "resourceVersion")) {
    return ConflictError("PATCH", path, t,
                         "the object has been modified; please apply your changes to the latest version and try "
                         "again");
  }
  if (const std::string uid = MetaString(patch, "uid"); !uid.empty() && uid != MetaString(stored, "uid")) {
    return ApiError("PATCH", path, 409, "Conflict",
                    "Precondition failed: UID in precondition: " + uid +
                        ", UID in object meta: " + MetaString(stored, "uid"));
  }
  nlohmann::json next = stored;
  next.merge_patch(patch);
  // Identity is the server's: a patch cannot rename or re-identify the object.
  const nlohmann::json& old_meta = stored.at("metadata");
  nlohmann::json& new_meta = next["metadata"];
  if (!new_meta.is_object()) new_meta = nlohmann::json::object();
  for (const char* field : {"name", "namespace", "uid"}) {
    if (old_meta.contains(field)) {
      new_meta[field] = old_meta.at(field);
    } else {
      new_meta.erase(field);
    }
  }
  return CommitLocked(t.Key(), std::move(next));
}

Status FakeApi::Bind(const std::string& ns, const std::string& name, const std::string& uid,
                     const std::string& node, const std::map<std::string, std::string>& annotations) {
  const std::string path = PodPath(ns, name);
  TESSERA_RETURN_IF_ERROR(
      Begin({"BIND", path, {{"node", node}, {"uid", uid}, {"annotations", nlohmann::json(annotations)}}}));
  TESSERA_ASSIGN_OR_RETURN(Target t, ObjectTarget(path));
  const std::string verb_path = path + "/binding";
  MutexLock lock(mu_);
  auto it = objects_.find(t.Key());
  if (it == objects_.end()) return NotFoundError("POST", verb_path, t);
  TESSERA_RETURN_IF_ERROR(CheckUid(verb_path, it->second, uid));
  if (const std::string bound = FieldOf(it->second, "spec.nodeName"); !bound.empty()) {
    return ApiError("POST", verb_path, 409, "Conflict",
                    "pod " + name + " is already assigned to node \"" + bound + "\"");
  }
  nlohmann::json next = it->second;
  next["spec"]["nodeName"] = node;
  for (const auto& [key, value] : annotations) next["metadata"]["annotations"][key] = value;
  CommitLocked(t.Key(), std::move(next));
  return Status::Ok();
}

Status FakeApi::Evict(const std::string& ns, const std::string& name, const std::string& uid, bool dry_run) {
  const std::string path = PodPath(ns, name);
  TESSERA_RETURN_IF_ERROR(Begin({"EVICT", path, {{"uid", uid}, {"dryRun", dry_run}}}));
  TESSERA_ASSIGN_OR_RETURN(Target t, ObjectTarget(path));
  const std::string verb_path = path + "/eviction";
  MutexLock lock(mu_);
  auto it = objects_.find(t.Key());
  if (it == objects_.end()) return NotFoundError("POST", verb_path, t);
  TESSERA_RETURN_IF_ERROR(CheckUid(verb_path, it->second, uid));
  if (!dry_run) CommitLocked(t.Key(), nullptr);
  return Status::Ok();
}

Status FakeApi::Watch(const std::string& path, const std::string& resource_version,
                      const WatchHandler& on_event, const std::atomic<bool>* stop,
                      int timeout_seconds) {
  TESSERA_RETURN_IF_ERROR(Begin({"WATCH", path, nullptr}));
  const size_t query_at = path.find('?');
  TESSERA_ASSIGN_OR_RETURN(Target c, CollectionTarget(path.substr(0, query_at)));
  std::string label_selector, field_selector;
  if (query_at != std::string::npos) {
    for (const std::string& param : Split(std::string_view(path).substr(query_at + 1), '&')) {
      const size_t eq = param.find('=');
      const std::string key = param.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : Unescape(param.substr(eq + 1));
      if (key == "labelSelector") {
        label_selector = value;
      } else if (key == "fieldSelector") {
        field_selector = value;
      } else {
        return InvalidArgument("FakeApi: watch query parameter \"" + key + "\" is not supported");
      }
    }
  }
  TESSERA_ASSIGN_OR_RETURN(Selectors selectors, MakeSelectors(label_selector, field_selector));
  uint64_t at = 0;  // the last write this watch has passed
  if (!resource_version.empty()) {
    auto [end, ec] = std::from_chars(resource_version.data(), resource_version.data() + resource_version.size(), at);
    if (ec != std::errc() || end != resource_version.data() + resource_version.size()) {
      return InvalidArgument("FakeApi: resourceVersion \"" + resource_version + "\" is not decimal");
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(std::max(0, timeout_seconds));
  MutexLock lock(mu_);
  if (resource_version.empty()) at = rv_;
  ++open_watches_;
  // Every return below holds mu_.
  const auto done = [this](Status status) {
    mu_.AssertHeld();
    --open_watches_;
    return status;
  };
  while (true) {
    if (stop != nullptr && stop->load()) return done(Status::Ok());
    if (at < compacted_) {
      return done(ApiError("GET", path, 410, "Expired",
                           "too old resource version: " + std::to_string(at) + " (" + std::to_string(compacted_) +
                               ")"));
    }
    if (!hold_) {
      // The writes after `at`, as this watch sees them.
      std::vector<WatchEvent> events;
      for (const Write& w : history_) {
        if (w.rv <= at) continue;
        at = w.rv;
        auto t = ParsePath(w.key);
        if (!t.ok() || !InCollection(c, *t)) continue;
        const bool was = !w.before.is_null() && selectors.Match(w.before);
        const bool is = !w.after.is_null() && selectors.Match(w.after);
        if (was && is) {
          events.push_back({"MODIFIED", w.after});
        } else if (is) {
          events.push_back({"ADDED", w.after});
        } else if (was) {
          nlohmann::json last = w.after.is_null() ? w.before : w.after;
          if (w.after.is_null()) last["metadata"]["resourceVersion"] = std::to_string(w.rv);
          events.push_back({"DELETED", std::move(last)});
        }
      }
      if (!events.empty()) {
        lock.Unlock();
        for (WatchEvent& e : events) {
          if (!on_event(e)) {
            lock.Lock();
            return done(Status::Ok());
          }
        }
        lock.Lock();
        continue;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) return done(Status::Ok());
    changed_.WaitFor(mu_, std::chrono::milliseconds(20));
  }
}

Result<nlohmann::json> FakeApi::Upsert(const std::string& collection, nlohmann::json object) {
  TESSERA_ASSIGN_OR_RETURN(Target c, CollectionTarget(collection));
  if (!object.is_object()) return InvalidArgument("FakeApi: Upsert needs a JSON object");
  const std::string name = MetaString(object, "name");
  if (name.empty()) return InvalidArgument("FakeApi: Upsert needs metadata.name");
  Target t = c;
  t.name = name;
  MutexLock lock(mu_);
  nlohmann::json& meta = object["metadata"];
  if (!c.ns.empty()) meta["namespace"] = c.ns;
  if (MetaString(object, "uid").empty()) {
    auto it = objects_.find(t.Key());
    meta["uid"] = it != objects_.end() ? MetaString(it->second, "uid") : UidFor(++next_id_);
  }
  return CommitLocked(t.Key(), std::move(object));
}

Status FakeApi::Remove(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(Target t, ObjectTarget(path));
  MutexLock lock(mu_);
  if (!objects_.count(t.Key())) return NotFoundError("DELETE", path, t);
  CommitLocked(t.Key(), nullptr);
  return Status::Ok();
}

std::optional<nlohmann::json> FakeApi::Peek(const std::string& path) const {
  auto t = ObjectTarget(path);
  if (!t.ok()) return std::nullopt;
  MutexLock lock(mu_);
  auto it = objects_.find(t->Key());
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

std::string FakeApi::ResourceVersion() const {
  MutexLock lock(mu_);
  return std::to_string(rv_);
}

std::vector<FakeApi::Call> FakeApi::Calls() const {
  MutexLock lock(mu_);
  return calls_;
}

int FakeApi::CountCalls(const std::string& verb) const {
  MutexLock lock(mu_);
  return static_cast<int>(std::count_if(calls_.begin(), calls_.end(), [&](const Call& c) { return c.verb == verb; }));
}

void FakeApi::SetHook(Hook hook) {
  MutexLock lock(mu_);
  hook_ = std::move(hook);
}

void FakeApi::HoldWatches(bool hold) {
  MutexLock lock(mu_);
  hold_ = hold;
  changed_.NotifyAll();
}

void FakeApi::ExpireWatches() {
  MutexLock lock(mu_);
  compacted_ = rv_;
  history_.clear();
  changed_.NotifyAll();
}

int FakeApi::OpenWatches() const {
  MutexLock lock(mu_);
  return open_watches_;
}

}  // namespace tessera::kube
