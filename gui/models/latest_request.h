#pragma once
// Runs a computation for the viewer on a worker thread (QtConcurrent) and delivers the result on
// the UI thread, dropping it when a newer request has come meanwhile (design.md §7: views ask,
// models compute off the UI thread). `generation` is the model's request counter, shared with the
// worker; the caller increments it for each request and passes the value it got.
#include <QMetaObject>
#include <QPointer>
#include <QtConcurrent/QtConcurrentRun>

#include <atomic>
#include <cstdint>
#include <memory>

namespace gpumem::gui {

// compute(): runs on the worker; deliver(receiver, result): runs on receiver's thread unless
// receiver died or `generation` moved on.
template <class Receiver, class Compute, class Deliver>
void runLatest(Receiver* receiver, std::shared_ptr<std::atomic<std::uint64_t>> counter, std::uint64_t generation,
    Compute compute, Deliver deliver)
{
    QPointer<Receiver> self(receiver);
    (void)QtConcurrent::run([self, counter, generation, compute = std::move(compute), deliver = std::move(deliver)]() mutable {
        if (counter->load() != generation)
            return; // overtaken before it started
        auto result = compute();
        if (counter->load() != generation)
            return;
        QMetaObject::invokeMethod(
            self.data(),
            [self, counter, generation, result = std::move(result), deliver = std::move(deliver)]() mutable {
                if (self && counter->load() == generation)
                    deliver(self.data(), std::move(result));
            },
            Qt::QueuedConnection);
    });
}

} // namespace gpumem::gui
