#include "kube/informer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "kube/backoff.h"
#include "kube/paths.h"

namespace tessera::kube {
namespace {

std::string MetaString(const nlohmann::json& obj, const char* field) {
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return "";
  auto v = meta->find(field);
  return v != meta->end() && v->is_string() ? v->get<std::string>() : "";
}

}  // namespace

StoreDelta DiffStore(const std::map<std::string, nlohmann::json>& store, const std::vector<nlohmann::json>& items) {
  StoreDelta delta;
  std::map<std::string, const nlohmann::json*> fresh;
  for (const auto& item : items) fresh[Informer::KeyOf(item)] = &item;
  for (const auto& [key, old] : store) {
    if (!fresh.contains(key)) delta.deleted.push_back(old);
  }
  for (const auto& [key, item] : fresh) {
    auto it = store.find(key);
    if (it == store.end()) {
      delta.added.push_back(*item);
    } else if (MetaString(it->second, "resourceVersion") != MetaString(*item, "resourceVersion")) {
      delta.updated.emplace_back(it->second, *item);
    }
  }
  return delta;
}

void DropManagedFields(nlohmann::json& obj) {
  if (!obj.is_object()) return;
  if (auto meta = obj.find("metadata"); meta != obj.end() && meta->is_object()) meta->erase("managedFields");
}

bool ResourceVersionAtLeast(const std::string& have, const std::string& want) {
  if (want.empty()) return true;
  // Decimal digits only, no leading zeros beyond "0", at most 20 digits (uint64).
  auto decimal = [](const std::string& s) {
    return !s.empty() && s.size() <= 20 && (s.size() == 1 || s[0] != '0') &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!decimal(have) || !decimal(want)) return false;
  // Equal-length decimal strings compare as numbers; a longer one is larger.
  return have.size() != want.size() ? have.size() > want.size() : have >= want;
}

Informer::Informer(Api& api, std::string path, InformerOptions options)
    : api_(api), path_(std::move(path)), options_(std::move(options)) {}

Informer::~Informer() { Stop(); }

Status Informer::AddHandlers(EventHandlers handlers) {
  if (thread_.joinable() || stop_.load()) return FailedPrecondition("informer " + path_ + ": add handlers before Start()");
  handlers_.push_back(std::move(handlers));
  return Status::Ok();
}

Status Informer::Start() {
  if (thread_.joinable() || stop_.load()) return FailedPrecondition("informer " + path_ + ": already started");
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void Informer::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  MutexLock lock(mu_);
  return cv_.WaitFor(mu_, timeout, [this] { return synced_.load(); });
}

std::string Informer::KeyOf(const nlohmann::json& obj) {
  const std::string ns = MetaString(obj, "namespace");
  const std::string name = MetaString(obj, "name");
  return ns.empty() ? name : ns + "/" + name;
}

std::optional<nlohmann::json> Informer::Get(const std::string& key) const {
  MutexLock lock(mu_);
  auto it = store_.find(key);
  if (it == store_.end()) return std::nullopt;
  return it->second;
}

std::vector<nlohmann::json> Informer::List() const {
  MutexLock lock(mu_);
  std::vector<nlohmann::json> out;
  out.reserve(store_.size());
  for (const auto& [key, obj] : store_) out.push_back(obj);
  return out;
}

void Informer::ForEach(const std::function<void(const std::string& key, const nlohmann::json& obj)>& fn) const {
  MutexLock lock(mu_);
  for (const auto& [key, obj] : store_) fn(key, obj);
}

std::string Informer::ResourceVersion() const {
  MutexLock lock(mu_);
  return resource_version_;
}

bool Informer::WaitForResourceVersion(const std::string& rv, std::chrono::milliseconds timeout) const {
  MutexLock lock(mu_);
  return cv_.WaitFor(mu_, timeout,
                     [&] {
                       mu_.AssertHeld();
                       return stop_.load() || ResourceVersionAtLeast(resource_version_, rv);
                     }) &&
         !stop_.load();
}

void Informer::SleepFor(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  cv_.WaitFor(mu_, d, [this] { return stop_.load(); });
}

void Informer::Run() {
  Backoff backoff(options_.backoff_base, options_.backoff_cap);
  std::string watch_path = path_;
  if (!options_.label_selector.empty()) watch_path = AppendQuery(watch_path, "labelSelector", options_.label_selector);
  if (!options_.field_selector.empty()) watch_path = AppendQuery(watch_path, "fieldSelector", options_.field_selector);
  bool need_list = true;
  while (!stop_.load()) {
    if (need_list) {
      if (Status s = ListAndApply(); !s.ok()) {
        spdlog::warn("informer {}: {}; retrying", path_, s.message());
        SleepFor(backoff.Next());
        continue;
      }
      need_list = false;
      backoff.Reset();
    }
    const auto started = std::chrono::steady_clock::now();
    int events = 0;
    const Status s = api_.Watch(
        watch_path, ResourceVersion(),
        [this, &events](WatchEvent& e) {
          ++events;
          return Apply(e);
        },
        &stop_, options_.watch_timeout_seconds);
    if (stop_.load()) break;
    if (s.ok()) {
      // A watch the server ends at once, again and again, must not spin.
      if (events == 0 && std::chrono::steady_clock::now() - started < std::chrono::milliseconds(500)) {
        SleepFor(backoff.Next());
      } else {
        backoff.Reset();
      }
    } else if (s.code() == StatusCode::kOutOfRange) {
      spdlog::info("informer {}: {}; listing again", path_, s.message());
      need_list = true;
    } else {
      spdlog::warn("informer {}: watch: {}; retrying", path_, s.message());
      SleepFor(backoff.Next());
    }
  }
}

Status Informer::ListAndApply() {
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json list,
                           api_.List(path_, options_.label_selector, options_.field_selector, options_.page_size));
  std::vector<nlohmann::json> items;
  if (auto it = list.find("items"); it != list.end() && it->is_array()) {
    items.reserve(it->size());
    for (auto& item : *it) {
      if (!options_.keep_managed_fields) DropManagedFields(item);
      items.push_back(std::move(item));
    }
  }
  StoreDelta delta;
  {
    MutexLock lock(mu_);
    delta = DiffStore(store_, items);
    store_.clear();
    for (auto& item : items) {
      std::string key = KeyOf(item);
      store_[std::move(key)] = std::move(item);
    }
    resource_version_ = list.value("resourceVersion", std::string());
  }
  ++lists_;
  for (const auto& h : handlers_) {
    for (const auto& obj : delta.deleted) if (h.on_delete) h.on_delete(obj);
    for (const auto& [old_obj, new_obj] : delta.updated) if (h.on_update) h.on_update(old_obj, new_obj);
    for (const auto& obj : delta.added) if (h.on_add) h.on_add(obj);
  }
  {
    MutexLock lock(mu_);
    synced_ = true;
  }
  cv_.NotifyAll();
  return Status::Ok();
}

bool Informer::Apply(WatchEvent& event) {
  if (stop_.load()) return false;
  nlohmann::json& obj = event.object;
  const std::string rv = MetaString(obj, "resourceVersion");
  if (event.type == "BOOKMARK") {
    {
      MutexLock lock(mu_);
      if (!rv.empty()) resource_version_ = rv;
    }
    cv_.NotifyAll();
    return true;
  }
  const std::string key = KeyOf(obj);
  const bool deleted = event.type == "DELETED";
  if (key.empty() || (!deleted && event.type != "ADDED" && event.type != "MODIFIED")) {
    spdlog::warn("informer {}: ignoring {} event without a name", path_, event.type);
    return true;
  }
  // The event's object moves into the store (no copy of the whole object per
  // event); a deleted one stays in the event for the handlers.
  if (!deleted && !options_.keep_managed_fields) DropManagedFields(obj);
  std::optional<nlohmann::json> old;
  const nlohmann::json* stored = &obj;
  {
    MutexLock lock(mu_);
    auto it = store_.find(key);
    if (it != store_.end()) {
      old = std::move(it->second);
      if (deleted) store_.erase(it);
    }
    if (!deleted) {
      nlohmann::json& slot = store_[key];
      slot = std::move(obj);
      // Read below without the lock: only this thread writes the store, and
      // a map's elements stay where they are until erased.
      stored = &slot;
    }
    if (!rv.empty()) resource_version_ = rv;
  }
  cv_.NotifyAll();
  for (const auto& h : handlers_) {
    if (deleted) {
      if (h.on_delete) h.on_delete(obj);
    } else if (old) {
      if (h.on_update) h.on_update(*old, *stored);
    } else if (h.on_add) {
      h.on_add(*stored);
    }
  }
  return !stop_.load();
}

}  // namespace tessera::kube
