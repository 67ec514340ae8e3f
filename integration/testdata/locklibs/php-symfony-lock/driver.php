<?php
// Driver for symfony/lock 5.4 (Debian php-symfony-lock) RedisStore, with the
// phpredis extension and with Predis: acquire, refresh (extend), shared (read)
// locks, release, refused second acquirer. Its scripts keep a sorted set per
// lock (ZADD/ZSCORE/ZREMRANGEBYSCORE/PEXPIREAT) and read the clock with TIME.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
declare(strict_types=1);
require_once 'Symfony/Component/Lock/autoload.php';
require_once 'Predis/autoload.php';

use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\RedisStore;

[$host, $port] = explode(':', getenv('REDIS_ADDR') ?: '127.0.0.1:6379') + [1 => '6379'];
$port = (int)$port;
set_exception_handler(function (Throwable $e): void {
    fwrite(STDERR, "FAIL: " . get_class($e) . ": " . $e->getMessage() . "\n");
    exit(1);
});

function check(bool $cond, string $msg): void {
    if (!$cond) { throw new RuntimeException($msg); }
    echo "ok: $msg\n";
}
function phpredis(string $host, int $port): Redis {
    $r = new Redis();
    $r->connect($host, $port, 2.0);
    return $r;
}
function predis(string $host, int $port): Predis\Client {
    return new Predis\Client(['scheme' => 'tcp', 'host' => $host, 'port' => $port]);
}

// raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
$raw = phpredis($host, $port);
$raw->client('setname', 'fencer-survey-check');

function exercise(string $label, callable $client, Redis $raw): void {
    $key = 'fencer-survey-' . getmypid() . '-' . $label;
    $fa = new LockFactory(new RedisStore($client()));
    $fb = new LockFactory(new RedisStore($client()));

    $a = $fa->createLock($key, 3.0, false);
    check($a->acquire(false), "$label: acquired $key");
    $members = $raw->zRange($key, 0, -1, true);
    echo "$label: sorted set members (token => expiry ms): " . json_encode($members) . "\n";
    check(count($members) === 2 && isset($members['__write__']), "$label: key is a sorted set holding the token and __write__");
    $a->refresh(10.0);
    $pttl = $raw->pttl($key);
    check($pttl > 9000, "$label: refresh(10) extended the lock (pttl $pttl ms)");
    check($a->getRemainingLifetime() > 9.0, "$label: getRemainingLifetime() " . round($a->getRemainingLifetime(), 2) . " s");

    $b = $fb->createLock($key, 3.0, false);
    check(!$b->acquire(false), "$label: second acquirer refused while the first holds the lock");
    check(!$b->acquireRead(false), "$label: second acquirer's read (shared) lock refused while a write lock is held");
    check($a->isAcquired(), "$label: first still holds (isAcquired, exists script)");
    $a->release();
    echo "$label: released\n";
    check($raw->exists($key) === 0, "$label: key gone after release");
    check($b->acquire(false), "$label: second acquirer acquires after release");
    $b->release();

    // shared locks: two readers together, a writer refused
    $r1 = $fa->createLock($key, 3.0, false);
    $r2 = $fb->createLock($key, 3.0, false);
    check($r1->acquireRead(false) && $r2->acquireRead(false), "$label: two read (shared) locks held together");
    $w = $fb->createLock($key, 3.0, false);
    check(!$w->acquire(false), "$label: writer refused while readers hold the lock");
    $r1->release(); $r2->release();
    check($w->acquire(false), "$label: writer acquires after the readers released");
    $w->release();
}

try {
    exercise('phpredis', fn() => phpredis($host, $port), $raw);
    exercise('predis', fn() => predis($host, $port), $raw);
    echo "PASS php-symfony-lock\n";
    exit(0);
} catch (Throwable $e) {
    fwrite(STDERR, "FAIL: " . get_class($e) . ": " . $e->getMessage() . "\n" . $e->getTraceAsString() . "\n");
    exit(1);
}
