#pragma once
// A flat open-addressing hash map from a non-zero Address to a value (linear probing, backward-shift
// deletion, power-of-two capacity). The replay's hot path looks up a block by address on every free;
// this keeps that lookup to one or two cache lines. Not thread-safe.
#include "core/types.h"

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace gpumem::replay::detail {

template <typename Value> class AddressMap {
public:
    AddressMap() { m_slots.resize(64); }

    std::size_t size() const { return m_size; }

    // Inserts or overwrites. address must not be 0 (0 marks an empty slot).
    void insert(Address address, Value value)
    {
        if ((m_size + 1) * 4 > m_slots.size() * 3)
            grow();
        std::size_t i = slotOf(address);
        while (m_slots[i].first != 0 && m_slots[i].first != address)
            i = (i + 1) & mask();
        if (m_slots[i].first == 0)
            ++m_size;
        m_slots[i] = { address, value };
    }

    // The value at address, or nullptr.
    Value* find(Address address)
    {
        std::size_t i = slotOf(address);
        while (m_slots[i].first != 0) {
            if (m_slots[i].first == address)
                return &m_slots[i].second;
            i = (i + 1) & mask();
        }
        return nullptr;
    }
    const Value* find(Address address) const { return const_cast<AddressMap*>(this)->find(address); }

    bool erase(Address address)
    {
        const std::size_t i = slotIndex(address);
        if (i == kNoSlot)
            return false;
        eraseSlot(i);
        return true;
    }

    // Erases the value at address and returns it (one probe where find() then erase() take two);
    // nullopt when absent.
    std::optional<Value> take(Address address)
    {
        const std::size_t i = slotIndex(address);
        if (i == kNoSlot)
            return std::nullopt;
        Value v = std::move(m_slots[i].second);
        eraseSlot(i);
        return v;
    }

    template <typename F> void forEach(F&& f) const
    {
        for (const auto& s : m_slots)
            if (s.first != 0)
                f(s.first, s.second);
    }

private:
    static constexpr std::size_t kNoSlot = ~std::size_t(0);
    std::size_t slotIndex(Address address) const
    {
        std::size_t i = slotOf(address);
        while (m_slots[i].first != address) {
            if (m_slots[i].first == 0)
                return kNoSlot;
            i = (i + 1) & mask();
        }
        return i;
    }
    void eraseSlot(std::size_t i)
    {
        // Backward-shift deletion keeps every probe chain unbroken without tombstones.
        std::size_t hole = i;
        std::size_t j = i;
        for (;;) {
            j = (j + 1) & mask();
            if (m_slots[j].first == 0)
                break;
            std::size_t home = slotOf(m_slots[j].first);
            bool movable = (hole <= j) ? (home <= hole || home > j) : (home <= hole && home > j);
            if (movable) {
                m_slots[hole] = m_slots[j];
                hole = j;
            }
        }
        m_slots[hole].first = 0;
        --m_size;
    }
    std::size_t mask() const { return m_slots.size() - 1; }
    std::size_t slotOf(Address a) const
    {
        // Fibonacci hashing: block addresses are multiples of 512, so mix the bits first.
        return std::size_t((a * 0x9E3779B97F4A7C15ull) >> 20) & mask();
    }
    void grow()
    {
        std::vector<std::pair<Address, Value>> old;
        old.swap(m_slots);
        m_slots.resize(old.size() * 2);
        m_size = 0;
        for (const auto& s : old)
            if (s.first != 0)
                insert(s.first, s.second);
    }
    std::vector<std::pair<Address, Value>> m_slots;
    std::size_t m_size = 0;
};

} // namespace gpumem::replay::detail
